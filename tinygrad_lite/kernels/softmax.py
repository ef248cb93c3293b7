"""Softmax and log-softmax over the last axis, forward and backward.

    softmax(x)_j = exp(x_j) / sum_k exp(x_k)        log_softmax(x)_j = x_j - log(sum_k exp(x_k))

Softmax turns the attention scores QK^T / sqrt(d_k) into weights that sum to 1 (the paper's
Eq. 1, "Scaled Dot-Product Attention"); log-softmax feeds the cross-entropy loss. The formulas
are the ops' own, in tinygrad_lite/ops/nn.py (softmax_forward, softmax_backward,
log_softmax_forward, log_softmax_backward); this file holds their Numba twins (``*_numba``, the
same signatures), which kernels.TWINS registers and the numba backend runs (tinygrad_lite.dispatch).

Conventions shared by the formulas and the kernels:

* Stability: each row is shifted by its maximum before ``exp``, so logits of +-1e4 are fine.
* ``mask`` (softmax only) broadcasts against ``x`` and is either ADDITIVE floats (0 keeps a
  position, -inf removes it, any other value is added to the logit) or BOOLEAN where True means
  "may attend" and False becomes -inf. Integer masks are ambiguous: Tensor.softmax rejects
  them (arguments are checked once, where users pass them; the kernels assert their
  preconditions).
* A row whose logits are all -inf (e.g. fully masked) has softmax 0 everywhere and
  log-softmax -inf everywhere; the gradient flowing back through such a row is 0. No NaN.
* A NaN anywhere in a row makes that whole output row NaN: errors are never hidden.
* float32 and float64 are supported; outputs have the input dtype. Inputs that are not
  C-contiguous are copied once; empty arrays give empty results.

The kernels compute the formulas with a vectorisable exp (kernels.exp_and_max) and rows processed in
cache-sized chunks.
"""
import functools
import math
from types import SimpleNamespace

import numpy as np

from .backend import (
    FASTMATH,
    lazy_kernels,
    rows_of,
    threads_for,
)
from .exp_and_max import numba_exp_and_max, row_max, simd_exp

# ---------------------------------------------------------------------------------------------
# Preconditions and mask preparation
# ---------------------------------------------------------------------------------------------

def _trusted(*arrays):
    """The kernels' preconditions (Tensor methods and nn.functional check what users pass):
    float32/float64 arrays, at least 1-D, all of one shape and dtype."""
    first = arrays[0]
    assert first.dtype in (np.float32, np.float64) and first.ndim >= 1, (first.dtype, first.shape)
    assert all(a.shape == first.shape and a.dtype == first.dtype for a in arrays[1:])


def _as_scale(scale, dtype):
    assert math.isfinite(scale), scale
    return dtype.type(scale)


def _trusted_mask(mask, x):
    """The mask's preconditions: boolean or float, and broadcasting to x's shape without growing it."""
    assert mask.dtype == np.bool_ or mask.dtype.kind == "f", mask.dtype
    assert mask.ndim <= x.ndim, (mask.shape, x.shape)
    assert all(m in (1, n) for m, n in zip(mask.shape[::-1], x.shape[::-1])), (mask.shape, x.shape)


def additive_mask(mask, dtype):
    """A mask as numbers added to the logits, as the formula reads it (ops.nn.additive_mask): True (may attend)
    -> 0, False -> -inf; floats in `dtype`."""
    if mask.dtype == np.bool_:
        return np.where(mask, dtype.type(0), dtype.type(-np.inf))
    return mask.astype(dtype, copy=False)


def _mask_by_row(additive, x_shape):
    """(mask rows as a C-contiguous (M, N) array, int64 index of the mask row for each x row)."""
    n = x_shape[-1]
    mask = additive.reshape((1,) * (len(x_shape) - additive.ndim) + additive.shape)
    mask_lead = mask.shape[:-1]
    mask_rows = np.array(np.broadcast_to(mask, mask_lead + (n,)), order="C").reshape(-1, n)
    numbering = np.arange(mask_rows.shape[0], dtype=np.int64).reshape(mask_lead)
    row_of = np.array(np.broadcast_to(numbering, x_shape[:-1]), order="C").reshape(-1)
    return mask_rows, row_of


# ---------------------------------------------------------------------------------------------
# Numba kernels: the same arithmetic as the formulas, with the rows cut into cache-sized chunks
# ---------------------------------------------------------------------------------------------

# Rows are processed in chunks of about this many elements: small enough to stay in the L1/L2
# cache between passes, large enough that the exp pass runs as one long SIMD loop.
CHUNK_ELEMS = 4096


# Stubs that only name the per-chunk bodies: Numba compiles the bodies registered with @overload
# below. Kernels reach them through module-level names like these rather than closure variables,
# because Numba keys its on-disk cache on the pickled closure, which would change from run to run
# if it held jit functions.

def _chunking(n_rows, n_cols):
    """(rows per chunk, number of chunks) for chunks of about CHUNK_ELEMS elements."""
    step = max(1, CHUNK_ELEMS // n_cols)
    return step, (n_rows + step - 1) // step


def _softmax_rows(x, scale, mask, mask_row_of, out):
    """out = softmax(x * scale + mask[mask_row_of]) for a block of rows (Numba only)."""
    raise NotImplementedError


def _softmax_backward_rows(y, dy, scale, dx):
    """dx = scale * y * (dy - sum(dy * y)) for a block of rows (Numba only)."""
    raise NotImplementedError


def _row_sum(a, r):
    """Σ_j a[r, j] for 2-D a (Numba only)."""
    raise NotImplementedError


def _log_softmax_rows(x, out):
    """out = log_softmax(x) for a block of rows (Numba only)."""
    raise NotImplementedError


def _log_softmax_backward_rows(y, dy, dx):
    """dx = dy - exp(y) * sum(dy) for a block of rows, 0 on all -inf rows (Numba only)."""
    raise NotImplementedError


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use Numba kernels; returns a namespace of them."""
    from numba.extending import register_jitable

    exps = numba_exp_and_max()
    register_jitable(_chunking)
    _register_row_sum()
    _register_softmax_rows(numba)
    _register_log_softmax_rows(numba)
    _register_log_softmax_backward_rows(numba)
    return SimpleNamespace(**_compile_drivers(numba), exp_f32=exps.exp_f32, exp_f64=exps.exp_f64)


def register_numba() -> None:
    """Compile this module's kernels on first use, registering simd_exp and row_max (kernels.exp_and_max)
    as Numba functions that kernels elsewhere inline (transformer/fast/decoder_kernel.py)."""
    _numba_kernels()


# Chunk bodies. Rows arrive as views indexed from 0, so LLVM can prove indices non-negative and
# vectorise; exp runs as one long loop over the whole chunk instead of one per row.

def _register_row_sum():
    """Compile _row_sum, inlined into the chunk bodies under their fastmath flags."""
    from numba.extending import overload

    @overload(_row_sum, jit_options={"fastmath": FASTMATH}, inline="always")
    def _row_sum_typed(a, r):
        def row_sum(a, r):
            total = a.dtype.type(0)
            for j in range(a.shape[1]):
                total += a[r, j]
            return total
        return row_sum


def _register_softmax_rows(numba):
    """Compile _softmax_rows and _softmax_backward_rows."""
    from numba.extending import overload

    @overload(_softmax_rows, jit_options={"fastmath": FASTMATH})
    def _softmax_rows_typed(x, scale, mask, mask_row_of, out):
        def softmax_rows(x, scale, mask, mask_row_of, out):
            n = x.shape[1]
            for r in range(x.shape[0]):
                if mask_row_of.size:
                    m = mask_row_of[r]
                    for j in range(n):
                        out[r, j] = x[r, j] * scale + mask[m, j]
                    top = row_max(out, r)
                    if top != -np.inf:
                        for j in range(n):
                            out[r, j] -= top
                else:  # max(x * scale) = max(x) * scale exactly, as scale >= 0 here
                    top = row_max(x, r) * scale
                    top = x.dtype.type(0) if top == -np.inf else top
                    for j in range(n):
                        out[r, j] = x[r, j] * scale - top
            flat = out.reshape(out.size)
            for i in range(flat.size):
                flat[i] = simd_exp(flat[i])
            for r in range(x.shape[0]):
                total = _row_sum(out, r)
                if total != 0:
                    inv = x.dtype.type(1) / total
                    for j in range(n):
                        out[r, j] *= inv
        return softmax_rows

    @overload(_softmax_backward_rows, jit_options={"fastmath": FASTMATH})
    def _softmax_backward_rows_typed(y, dy, scale, dx):
        def softmax_backward_rows(y, dy, scale, dx):
            n = y.shape[1]
            for r in range(y.shape[0]):
                dot = y.dtype.type(0)
                for j in range(n):
                    dot += dy[r, j] * y[r, j]
                for j in range(n):
                    dx[r, j] = scale * y[r, j] * (dy[r, j] - dot)
        return softmax_backward_rows


def _register_log_softmax_rows(numba):
    """Compile _log_softmax_rows.

    log_softmax keeps its two subtractions apart, (x - max) - log(sum): folding max + log(sum)
    into one offset first would round it to the precision of max, which costs float32 results
    near 0 most of their digits when max is ~1e4. So x - max stays in out and the exps go to a
    scratch buffer.
    """
    from numba.extending import overload

    @overload(_log_softmax_rows, jit_options={"fastmath": FASTMATH})
    def _log_softmax_rows_typed(x, out):
        def log_softmax_rows(x, out):
            n = x.shape[1]
            for r in range(x.shape[0]):
                top = row_max(x, r)
                top = x.dtype.type(0) if top == -np.inf else top
                for j in range(n):
                    out[r, j] = x[r, j] - top
            exps = np.empty(x.shape, dtype=x.dtype)
            flat_out, flat_exps = out.reshape(out.size), exps.reshape(exps.size)
            for i in range(flat_out.size):
                flat_exps[i] = simd_exp(flat_out[i])
            for r in range(x.shape[0]):
                total = _row_sum(exps, r)
                if total != 0:
                    log_total = np.log(total)
                    for j in range(n):
                        out[r, j] -= log_total
        return log_softmax_rows


def _register_log_softmax_backward_rows(numba):
    """Compile _log_softmax_backward_rows: the exps go to dx first, then dx = dy - exps * sum(dy)."""
    from numba.extending import overload

    @overload(_log_softmax_backward_rows, jit_options={"fastmath": FASTMATH})
    def _log_softmax_backward_rows_typed(y, dy, dx):
        def log_softmax_backward_rows(y, dy, dx):
            n = y.shape[1]
            flat_y, flat_dx = y.reshape(y.size), dx.reshape(dx.size)
            for i in range(flat_y.size):
                flat_dx[i] = simd_exp(flat_y[i])
            for r in range(y.shape[0]):
                total_p = y.dtype.type(0)
                total_dy = y.dtype.type(0)
                for j in range(n):
                    total_p += dx[r, j]
                    total_dy += dy[r, j]
                if total_p == 0:
                    for j in range(n):
                        dx[r, j] = 0
                else:
                    for j in range(n):
                        dx[r, j] = dy[r, j] - dx[r, j] * total_dy
        return log_softmax_backward_rows


def _compile_drivers(numba):
    """The four kernels: each hands chunks of rows to threads (prange) and runs a chunk body on
    each (the wrappers keep small inputs on one thread, see backend.threads_for)."""
    njit = functools.partial(numba.njit, cache=True, parallel=True)
    prange = numba.prange

    @njit
    def softmax_forward(x, scale, mask, mask_row_of, out):
        """out[r] = softmax(x[r] * scale + mask[mask_row_of[r]]); no mask if mask_row_of is empty.

        Needs scale >= 0 (the wrapper flips the signs of x and scale otherwise).
        """
        step, n_chunks = _chunking(x.shape[0], x.shape[1])
        masked = mask_row_of.size > 0
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _softmax_rows(x[rows], scale, mask, mask_row_of[rows] if masked else mask_row_of,
                          out[rows])

    @njit
    def softmax_backward(y, dy, scale, dx):
        """dx[r] = scale * y[r] * (dy[r] - <dy[r], y[r]>)."""
        step, n_chunks = _chunking(y.shape[0], y.shape[1])
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _softmax_backward_rows(y[rows], dy[rows], scale, dx[rows])

    @njit
    def log_softmax_forward(x, out):
        """out[r] = (x[r] - max) - log(sum(exp(x[r] - max))); all -inf rows stay -inf."""
        step, n_chunks = _chunking(x.shape[0], x.shape[1])
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _log_softmax_rows(x[rows], out[rows])

    @njit
    def log_softmax_backward(y, dy, dx):
        """dx[r] = dy[r] - exp(y[r]) * sum(dy[r]); 0 on rows where y is all -inf."""
        step, n_chunks = _chunking(y.shape[0], y.shape[1])
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _log_softmax_backward_rows(y[rows], dy[rows], dx[rows])

    return {"softmax_forward": softmax_forward, "softmax_backward": softmax_backward,
            "log_softmax_forward": log_softmax_forward,
            "log_softmax_backward": log_softmax_backward}


# ---------------------------------------------------------------------------------------------
# Numba entry points (the formulas' signatures)
# ---------------------------------------------------------------------------------------------

def softmax_forward_numba(x, scale=1.0, mask=None):
    """softmax(x * scale + mask) over the last axis (Numba kernel)."""
    _trusted(x)
    scale = _as_scale(scale, x.dtype)
    additive = None
    if mask is not None:
        _trusted_mask(mask, x)
        additive = additive_mask(mask, x.dtype)
    out = np.empty(x.shape, x.dtype)
    if x.size == 0:
        return out
    n = x.shape[-1]
    if additive is None:
        mask_rows, row_of = np.zeros((1, n), x.dtype), np.zeros(0, np.int64)
    else:
        mask_rows, row_of = _mask_by_row(additive, x.shape)
    if scale < 0:
        x, scale = -x, -scale
    with threads_for(x.size):
        _numba_kernels().softmax_forward(rows_of(x), scale, mask_rows, row_of, out.reshape(-1, n))
    return out


def softmax_backward_numba(y, dy, scale=1.0):
    """dx = scale * y * (dy - sum(dy * y)) over the last axis (Numba kernel)."""
    _trusted(y, dy)
    scale = _as_scale(scale, y.dtype)
    dx = np.empty(y.shape, y.dtype)
    if y.size:
        with threads_for(y.size):
            _numba_kernels().softmax_backward(rows_of(y), rows_of(dy), scale,
                                              dx.reshape(-1, y.shape[-1]))
    return dx


def log_softmax_forward_numba(x):
    """log(softmax(x)) over the last axis (Numba kernel)."""
    _trusted(x)
    out = np.empty(x.shape, x.dtype)
    if x.size:
        with threads_for(x.size):
            _numba_kernels().log_softmax_forward(rows_of(x), out.reshape(-1, x.shape[-1]))
    return out


def log_softmax_backward_numba(y, dy):
    """dx = dy - exp(y) * sum(dy) over the last axis; 0 on all -inf rows (Numba kernel)."""
    _trusted(y, dy)
    dx = np.empty(y.shape, y.dtype)
    if y.size:
        with threads_for(y.size):
            _numba_kernels().log_softmax_backward(rows_of(y), rows_of(dy),
                                                  dx.reshape(-1, y.shape[-1]))
    return dx
