"""Explicit SIMD for the Numba kernels: 8 float32 lanes at a time, and a small-matrix product built on them.

LLVM vectorises a Numba loop 8 lanes x 4 interleaved = 32 floats at a time, so a loop of 16 (a row
of attention scores, or d_k = 32 split in two) runs entirely in its scalar remainder, and a sum
kept in an array is reloaded and stored at every step. The intrinsics here emit LLVM's
<8 x float> loads, fused multiply-adds and stores directly, on 8 consecutive floats of a 1-D
float32 array at an offset; `lanes()` is a 64-float scratch array on the stack, which LLVM keeps
in registers when the kernel indexes it only at constant offsets: the accumulators of a
micro-kernel, as in BLIS and OpenBLAS.

    rows_product(out, o, o_row, coef, c, c_row, c_step, count, x, xo, x_step, n_rows, width)

computes, for r < n_rows and the `width` columns (a multiple of 8) at a row's start,

    out[o + r·o_row + col] = Σ_{t < count} coef[c + r·c_row + t·c_step] · x[xo + t·x_step + col],

i.e. an (n_rows × count) · (count × width) product whose operands sit anywhere in flat arrays:
attention's Q·Kᵀ, P·V and their gradients for one (batch row, head), where BLAS spends more time
entering and leaving than multiplying (bench/README.md, "Tenth pass"). Its plain version is
np.matmul, which `tinygrad_lite.kernels.attention`'s NumPy twin runs.

Wide vectors: `wide_lanes()`, `w_zero`, `w_fma2` and `w_add` work on 16 floats at a time (LLVM's
<16 x float>, one AVX-512 register; two AVX2 registers elsewhere), for kernels.panels' products,
which run them only on CPUs with AVX-512.

The arguments are trusted (offsets are not checked): the callers size their arrays.
Importing this module compiles nothing; `register()` defines the intrinsics on first use.
"""
import numpy as np

LANES = 8          # floats in one vector (AVX2; LLVM splits it on narrower CPUs)
SCRATCH = 64       # floats in `lanes()`: 8 vector accumulators
WIDE = 16          # floats in one wide vector (AVX-512)
WIDE_SCRATCH = 256  # floats in `wide_lanes()`: 16 wide accumulators


# Stubs: kernels call these module-level names; register() gives them their compiled bodies
# (numba.extending.overload), so that no Numba object is made before the first kernel call.

def lanes():
    """A float32 array of SCRATCH elements on the stack (Numba only)."""
    raise NotImplementedError


def v_zero(a, i):
    """a[i:i+8] = 0."""
    raise NotImplementedError


def v_fma(acc, i, s, x, j):
    """acc[i:i+8] += s · x[j:j+8]."""
    raise NotImplementedError


def v_copy(dst, i, src, j):
    """dst[i:i+8] = src[j:j+8]."""
    raise NotImplementedError


def v_add(dst, i, src, j):
    """dst[i:i+8] += src[j:j+8]."""
    raise NotImplementedError


def v_shift_scale(dst, i, shift, scale):
    """dst[i:i+8] = (dst[i:i+8] + shift) · scale."""
    raise NotImplementedError


def v_scale_add(dst, i, scale, src, j):
    """dst[i:i+8] = dst[i:i+8] · scale + src[j:j+8]."""
    raise NotImplementedError


def v_keep(dst, i, keep, j, scale):
    """dst[i:i+8] ·= scale where keep[j:j+8] (bools) is True, else 0: inverted dropout."""
    raise NotImplementedError


def v_dot(a, i, b, j):
    """sum(a[i:i+8] · b[j:j+8])."""
    raise NotImplementedError


def v_softmax_grad(g, i, y, j, dot, scale):
    """g[i:i+8] = scale · y[j:j+8] · (g[i:i+8] − dot): softmax's backward, given dot = Σ g·y over the row."""
    raise NotImplementedError


def v_transpose8(dst, i, dst_step, src, j, src_step):
    """The 8 × 8 block of src whose rows start at j, j + src_step, ... written transposed to the rows of
    dst at i, i + dst_step, ...: dst[i + r·dst_step + c] = src[j + c·src_step + r]."""
    raise NotImplementedError


def v_max(a, i):
    """max(a[i:i+8])."""
    raise NotImplementedError


def v_sum(a, i):
    """sum(a[i:i+8])."""
    raise NotImplementedError


def wide_lanes():
    """A float32 array of WIDE_SCRATCH elements on the stack (Numba only)."""
    raise NotImplementedError


def w_zero(a, i):
    """a[i:i+16] = 0."""
    raise NotImplementedError


def w_fma2(acc, i, coef, k, x, j):
    """acc[i:i+16] += coef[k] · x[j:j+16] and acc[i+16:i+32] += coef[k] · x[j+16:j+32]."""
    raise NotImplementedError


def w_add(dst, i, a, j, b, k):
    """dst[i:i+16] = a[j:j+16] + b[k:k+16]."""
    raise NotImplementedError


def _micro_4x16(out, o, o_row, coef, c, c_row, c_step, count, x, xo, x_step, rows):
    """Up to 4 rows × 16 columns of rows_product: 8 accumulators. Rows past `rows` repeat the
    last one and are not stored, so the loop has no branch."""
    acc = lanes()
    for a in range(0, SCRATCH, LANES):
        v_zero(acc, a)
    c0, c1 = c, c + min(1, rows - 1) * c_row
    c2, c3 = c + min(2, rows - 1) * c_row, c + min(3, rows - 1) * c_row
    for t in range(count):
        p, ct = xo + t * x_step, t * c_step
        s0, s1, s2, s3 = coef[c0 + ct], coef[c1 + ct], coef[c2 + ct], coef[c3 + ct]
        v_fma(acc, 0, s0, x, p)
        v_fma(acc, 8, s0, x, p + 8)
        v_fma(acc, 16, s1, x, p)
        v_fma(acc, 24, s1, x, p + 8)
        v_fma(acc, 32, s2, x, p)
        v_fma(acc, 40, s2, x, p + 8)
        v_fma(acc, 48, s3, x, p)
        v_fma(acc, 56, s3, x, p + 8)
    for r in range(rows):
        v_copy(out, o + r * o_row, acc, 16 * r)
        v_copy(out, o + r * o_row + 8, acc, 16 * r + 8)


def _micro_4x8(out, o, o_row, coef, c, c_row, c_step, count, x, xo, x_step, rows):
    """Up to 4 rows × 8 columns of rows_product."""
    acc = lanes()
    for a in range(0, 4 * LANES, LANES):
        v_zero(acc, a)
    c0, c1 = c, c + min(1, rows - 1) * c_row
    c2, c3 = c + min(2, rows - 1) * c_row, c + min(3, rows - 1) * c_row
    for t in range(count):
        p, ct = xo + t * x_step, t * c_step
        v_fma(acc, 0, coef[c0 + ct], x, p)
        v_fma(acc, 8, coef[c1 + ct], x, p)
        v_fma(acc, 16, coef[c2 + ct], x, p)
        v_fma(acc, 24, coef[c3 + ct], x, p)
    for r in range(rows):
        v_copy(out, o + r * o_row, acc, 8 * r)


def _micro_2x32(out, o, o_row, coef, c, c_row, c_step, count, x, xo, x_step, rows):
    """Up to 2 rows × 32 columns of rows_product."""
    acc = lanes()
    for a in range(0, SCRATCH, LANES):
        v_zero(acc, a)
    c0, c1 = c, c + min(1, rows - 1) * c_row
    for t in range(count):
        p, ct = xo + t * x_step, t * c_step
        s0, s1 = coef[c0 + ct], coef[c1 + ct]
        v_fma(acc, 0, s0, x, p)
        v_fma(acc, 8, s0, x, p + 8)
        v_fma(acc, 16, s0, x, p + 16)
        v_fma(acc, 24, s0, x, p + 24)
        v_fma(acc, 32, s1, x, p)
        v_fma(acc, 40, s1, x, p + 8)
        v_fma(acc, 48, s1, x, p + 16)
        v_fma(acc, 56, s1, x, p + 24)
    for r in range(rows):
        for a in range(0, 32, LANES):
            v_copy(out, o + r * o_row + a, acc, 32 * r + a)


def rows_product(out, o, o_row, coef, c, c_row, c_step, count, x, xo, x_step, n_rows, width):
    """The small-matrix product of the module docstring, in column blocks of 32, then 16 and 8."""
    wide = width - width % 32
    for col in range(0, wide, 32):
        for r0 in range(0, n_rows, 2):
            _micro_2x32(out, o + r0 * o_row + col, o_row, coef, c + r0 * c_row, c_row, c_step, count, x, xo + col,
                        x_step, min(2, n_rows - r0))
    narrow = wide + 16 if width - wide >= 16 else wide
    if narrow > wide:
        for r0 in range(0, n_rows, 4):
            _micro_4x16(out, o + r0 * o_row + wide, o_row, coef, c + r0 * c_row, c_row, c_step, count, x, xo + wide,
                        x_step, min(4, n_rows - r0))
    if width > narrow:
        for r0 in range(0, n_rows, 4):
            _micro_4x8(out, o + r0 * o_row + narrow, o_row, coef, c + r0 * c_row, c_row, c_step, count, x,
                       xo + narrow, x_step, min(4, n_rows - r0))


# ---------------------------------------------------------------------------------------------
# The intrinsics: what each stub compiles to. Helpers first, then one code generator per stub,
# then the table that register() walks. Code generators run inside Numba's compiler, so llvmlite
# is imported there, never when this module is.
# ---------------------------------------------------------------------------------------------

def _ir():
    from llvmlite import ir
    return ir


def _vector(width=LANES):
    return _ir().VectorType(_ir().FloatType(), width)


def _pointer(context, builder, array_type, array, offset, vec):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [offset]), vec.as_pointer())


def _load(context, builder, sig, args, k, width=LANES):
    """The vector at args[k][args[k + 1]:]."""
    return builder.load(_pointer(context, builder, sig.args[k], args[k], args[k + 1], _vector(width)), align=4)


def _store(context, builder, sig, args, k, value):
    builder.store(value, _pointer(context, builder, sig.args[k], args[k], args[k + 1], value.type), align=4)


def _splat(builder, scalar, width=LANES):
    ir = _ir()
    vec, i32 = _vector(width), ir.IntType(32)
    one = builder.insert_element(ir.Constant(vec, ir.Undefined), scalar, ir.Constant(i32, 0))
    return builder.shuffle_vector(one, ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(i32, width),
                                                                                 [0] * width))


def _call(builder, name, *values):
    from numba.core import cgutils
    ir = _ir()
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(values[0].type, [v.type for v in values]),
                                        name)
    return builder.call(fn, list(values))


def _reduce(builder, v, combine):
    ir = _ir()
    i32 = ir.IntType(32)
    for half in (4, 2, 1):  # fold the upper half onto the lower one
        mask = ir.Constant(ir.VectorType(i32, LANES), [k + half if k < half else k for k in range(LANES)])
        v = combine(v, builder.shuffle_vector(v, ir.Constant(_vector(), ir.Undefined), mask))
    return builder.extract_element(v, ir.Constant(i32, 0))


def _scratch(floats):
    """The code generator of a stack array of `floats` float32s."""
    def codegen(context, builder, sig, args):
        from numba.core import cgutils, types
        data = cgutils.alloca_once(builder, _ir().FloatType(), size=floats)
        out = context.make_array(sig.return_type)(context, builder)
        n = context.get_constant(types.intp, floats)
        size = context.get_constant(types.intp, 4)
        context.populate_array(out, data=data, shape=cgutils.pack_array(builder, [n]),
                               strides=cgutils.pack_array(builder, [size]), itemsize=size, meminfo=None)
        return out._getvalue()
    return codegen


def _emit_v_zero(context, builder, sig, args):
    _store(context, builder, sig, args, 0, _ir().Constant(_vector(), [0.0] * LANES))


def _emit_v_fma(context, builder, sig, args):
    fma = _call(builder, "llvm.fma.v8f32", _splat(builder, args[2]), _load(context, builder, sig, args, 3),
                _load(context, builder, sig, args, 0))
    _store(context, builder, sig, args, 0, fma)


def _emit_v_copy(context, builder, sig, args):
    _store(context, builder, sig, args, 0, _load(context, builder, sig, args, 2))


def _emit_v_add(context, builder, sig, args):
    total = builder.fadd(_load(context, builder, sig, args, 0), _load(context, builder, sig, args, 2))
    _store(context, builder, sig, args, 0, total)


def _emit_v_shift_scale(context, builder, sig, args):
    shifted = builder.fadd(_load(context, builder, sig, args, 0), _splat(builder, args[2]))
    _store(context, builder, sig, args, 0, builder.fmul(shifted, _splat(builder, args[3])))


def _emit_v_scale_add(context, builder, sig, args):
    scaled = builder.fmul(_load(context, builder, sig, args, 0), _splat(builder, args[2]))
    _store(context, builder, sig, args, 0, builder.fadd(scaled, _load(context, builder, sig, args, 3)))


def _emit_v_keep(context, builder, sig, args):
    ir = _ir()
    flags = context.make_array(sig.args[2])(context, builder, args[2]).data
    byte_vec = ir.VectorType(ir.IntType(8), LANES)
    bytes_ = builder.load(builder.bitcast(builder.gep(flags, [args[3]]), byte_vec.as_pointer()), align=1)
    kept = builder.icmp_unsigned("!=", bytes_, ir.Constant(byte_vec, [0] * LANES))
    factor = builder.select(kept, _splat(builder, args[4]), ir.Constant(_vector(), [0.0] * LANES))
    _store(context, builder, sig, args, 0, builder.fmul(_load(context, builder, sig, args, 0), factor))


def _emit_v_dot(context, builder, sig, args):
    product = builder.fmul(_load(context, builder, sig, args, 0), _load(context, builder, sig, args, 2))
    return _reduce(builder, product, builder.fadd)


def _emit_v_softmax_grad(context, builder, sig, args):
    centred = builder.fsub(_load(context, builder, sig, args, 0), _splat(builder, args[4]))
    weighted = builder.fmul(builder.fmul(_load(context, builder, sig, args, 2), _splat(builder, args[5])), centred)
    _store(context, builder, sig, args, 0, weighted)


def _emit_v_transpose8(context, builder, sig, args):
    ir = _ir()
    i32, vec = ir.IntType(32), _vector()
    src_data = context.make_array(sig.args[3])(context, builder, args[3]).data
    dst_data = context.make_array(sig.args[0])(context, builder, args[0]).data
    rows = []
    for r in range(LANES):
        at = builder.add(args[4], builder.mul(args[5], ir.Constant(args[5].type, r)))
        rows.append(builder.load(builder.bitcast(builder.gep(src_data, [at]), vec.as_pointer()), align=4))
    low = ir.Constant(ir.VectorType(i32, LANES), [0, 8, 1, 9, 2, 10, 3, 11])
    high = ir.Constant(ir.VectorType(i32, LANES), [4, 12, 5, 13, 6, 14, 7, 15])
    for _ in range(3):  # three rounds of zipping row r with row r + 4 transpose 8 × 8
        zipped = []
        for r in range(4):
            zipped += [builder.shuffle_vector(rows[r], rows[r + 4], low),
                       builder.shuffle_vector(rows[r], rows[r + 4], high)]
        rows = zipped
    for r in range(LANES):
        at = builder.add(args[1], builder.mul(args[2], ir.Constant(args[2].type, r)))
        builder.store(rows[r], builder.bitcast(builder.gep(dst_data, [at]), vec.as_pointer()), align=4)


def _emit_v_max(context, builder, sig, args):
    return _reduce(builder, _load(context, builder, sig, args, 0),
                   lambda u, w: _call(builder, "llvm.maxnum.v8f32", u, w))


def _emit_v_sum(context, builder, sig, args):
    return _reduce(builder, _load(context, builder, sig, args, 0), builder.fadd)


def _emit_w_zero(context, builder, sig, args):
    _store(context, builder, sig, args, 0, _ir().Constant(_vector(WIDE), [0.0] * WIDE))


def _emit_w_fma2(context, builder, sig, args):
    ir, wide = _ir(), _vector(WIDE)
    data = context.make_array(sig.args[2])(context, builder, args[2]).data
    s = _splat(builder, builder.load(builder.gep(data, [args[3]]), align=4), WIDE)
    for half in (0, WIDE):
        at_x = builder.add(args[5], ir.Constant(args[5].type, half))
        at_acc = _pointer(context, builder, sig.args[0], args[0], builder.add(args[1], ir.Constant(args[1].type, half)),
                          wide)
        fma = _call(builder, "llvm.fma.v16f32", s,
                    builder.load(_pointer(context, builder, sig.args[4], args[4], at_x, wide), align=4),
                    builder.load(at_acc, align=4))
        builder.store(fma, at_acc, align=4)


def _emit_w_add(context, builder, sig, args):
    total = builder.fadd(_load(context, builder, sig, args, 2, WIDE), _load(context, builder, sig, args, 4, WIDE))
    _store(context, builder, sig, args, 0, total)


# stub, its signature (what it returns; each argument: "f" a float32 scalar, "." the type given), the LLVM it emits
INTRINSICS = (
    (lanes, ("array", ""), _scratch(SCRATCH)),
    (v_zero, ("void", ".."), _emit_v_zero),
    (v_fma, ("void", "..f.."), _emit_v_fma),
    (v_copy, ("void", "...."), _emit_v_copy),
    (v_add, ("void", "...."), _emit_v_add),
    (v_shift_scale, ("void", "..ff"), _emit_v_shift_scale),
    (v_scale_add, ("void", "..f.."), _emit_v_scale_add),
    (v_keep, ("void", "....f"), _emit_v_keep),
    (v_dot, ("f32", "...."), _emit_v_dot),
    (v_softmax_grad, ("void", "....ff"), _emit_v_softmax_grad),
    (v_transpose8, ("void", "......"), _emit_v_transpose8),
    (v_max, ("f32", ".."), _emit_v_max),
    (v_sum, ("f32", ".."), _emit_v_sum),
    (wide_lanes, ("array", ""), _scratch(WIDE_SCRATCH)),
    (w_zero, ("void", ".."), _emit_w_zero),
    (w_fma2, ("void", "......"), _emit_w_fma2),
    (w_add, ("void", "......"), _emit_w_add),
)


def _named(arity, call):
    """A function of `arity` named arguments returning call(*arguments): Numba's intrinsic typers and
    overloads must name their arguments (no *args)."""
    return {
        0: lambda: call(),
        1: lambda a: call(a),
        2: lambda a, b: call(a, b),
        3: lambda a, b, c: call(a, b, c),
        4: lambda a, b, c, d: call(a, b, c, d),
        5: lambda a, b, c, d, e: call(a, b, c, d, e),
        6: lambda a, b, c, d, e, f: call(a, b, c, d, e, f),
        7: lambda a, b, c, d, e, f, g: call(a, b, c, d, e, f, g),
    }[arity]


def register(numba):
    """Compile the intrinsics behind the stubs (the table INTRINSICS) and make the micro-kernels jitable (once)."""
    if getattr(register, "done", False):
        return
    from numba.core import types
    from numba.extending import register_jitable

    returns = {"void": types.void, "f32": types.float32, "array": types.Array(types.float32, 1, "C")}
    for stub, (result, arguments), codegen in INTRINSICS:
        _bind(stub, returns[result], arguments, codegen)
    for micro in (_micro_4x16, _micro_4x8, _micro_2x32):  # inlined into rows_product, compiled once
        register_jitable(inline="always")(micro)
    register_jitable(rows_product)
    register.done = True


def _bind(stub, result, arguments, codegen):
    """One row of INTRINSICS: the intrinsic that emits `codegen`, typed result(arguments), and the stub
    overloaded (inlined) to call it."""
    from numba.core import types
    from numba.extending import intrinsic, overload

    def typed(typingctx, *given):
        return result(*(types.float32 if kind == "f" else t for kind, t in zip(arguments, given))), codegen
    typer = _named(len(arguments) + 1, typed)
    typer.__name__ = "_" + stub.__name__
    call = _named(len(arguments), intrinsic(typer))
    overload(stub, inline="always")(_named(len(arguments), lambda *given: call))


def reference_rows_product(out, o, o_row, coef, c, c_row, c_step, count, x, xo, x_step, n_rows, width):
    """rows_product in NumPy (its test oracle)."""
    for r in range(n_rows):
        a = coef[c + r * c_row + np.arange(count) * c_step]
        rows = x[xo + np.arange(count)[:, None] * x_step + np.arange(width)[None, :]]
        out[o + r * o_row:o + r * o_row + width] = a @ rows
