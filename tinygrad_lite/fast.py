"""Speed tricks and the step compiler's rules, switched in one place. Each is a faster twin of a plain
version that stays in the engine's own files, off the reading path (the paper's boxes and the op files
never branch on one): a rule fuses plain ops in a compiled step (tinygrad_lite/compiler/rules/), a trick
is one visible branch in the machinery that picks its twin. The plain version is each one's test oracle
(tests/test_fast_paths.py, tests/test_compile_rules*.py run both and compare values and gradients).

A trick stays only while it pays. The measurement quoted with each one comes from
`python3 bench/speed_tricks.py`, which times the trick on against off in one process
(bench/README.md, "Speed tricks"). To run the plain versions:

    with fast.tricks_off():                   # every trick and rule; or tricks_off("fused_ffn")
        ...
    with fast.plain():                        # every trick off and the kernels' NumPy twins:
        ...                                   # the formula path, end to end
    TINYGRAD_LITE_FAST=0 python3 -m pytest    # the whole process, from its start
"""
from __future__ import annotations

import contextlib

from .checks import switched_off

NAMES = ("fused_residual", "fused_ffn", "fused_attention", "attention_kernels", "decoder_kernel", "decoder_layouts",
         "skip_padding", "panel_products", "mkl_products", "gpt_kernel", "flat_optimizer")
ENV_VAR = "TINYGRAD_LITE_FAST"


class Tricks:
    """One on/off switch per trick (all on unless TINYGRAD_LITE_FAST=0), read on every call."""

    __slots__ = NAMES

    def __init__(self, on: bool):
        for name in NAMES:
            setattr(self, name, on)

    def __repr__(self):
        return "Tricks(" + ", ".join(f"{n}={getattr(self, n)}" for n in NAMES) + ")"


TRICKS = Tricks(not switched_off(ENV_VAR))


def tricks_off(*names: str):
    """Context manager: the plain versions of the named tricks (all of them if none is named) run
    inside the block."""
    return _switched(False, names)


def tricks_on(*names: str):
    """Context manager: the named tricks (all if none is named) run inside the block."""
    return _switched(True, names)


@contextlib.contextmanager
def plain():
    """Context manager: the formula path, end to end. Every trick is off and the ops run their NumPy
    formulas, the kernels their NumPy twins (kernels.use_backend("numpy")), so what runs inside is
    what the paper's boxes and the Tensor ops say, one op at a time: what graph pictures, notebooks
    and the walkthrough show, and the oracle every fast path is tested against
    (tests/test_plain_path.py)."""
    from .kernels.backend import use_backend
    with tricks_off(), use_backend("numpy"):
        yield TRICKS


@contextlib.contextmanager
def _switched(on: bool, names):
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        raise ValueError(f"fast: unknown trick(s) {unknown}; the tricks are {list(NAMES)}")
    names = names or NAMES
    before = {n: getattr(TRICKS, n) for n in names}
    for n in names:
        setattr(TRICKS, n, on)
    try:
        yield TRICKS
    finally:
        for n, value in before.items():
            setattr(TRICKS, n, value)


# Each trick below: its switch's name, then on its docstring's first line why it pays, measured
# with bench/speed_tricks.py (off/on: time with the trick off over time with it on, the median of
# 5-7 runs, 1 thread; bench/README.md, "Speed tricks", 2026-12-01), then where its plain version
# sits. Dropped because they no longer paid (same section): leaves adopting a gradient nothing
# else refers to (a sys.getrefcount shortcut), attrgetter properties, an all-int shortcut in shape
# arguments, dropout's scale-then-mask order; and on 2026-12-06 (Xeon AVX-512, 9 repeats; the control
# `none`: train SMALL 1.013, decode 1.039): members_in_dict (registered members mirrored in a Module's
# __dict__: train TINY 1.017, SMALL 0.992, decode b1 1.053), skip_scope (no module scope under no_grad:
# 1.003, 0.991, 0.989) and scalar_operand (a Python number as a NumPy scalar under no_grad: 0.996, 0.991,
# 1.018). Became plain code: dropout_bits (train SMALL 1.12), whose counter-based mask is now dropout's
# formula (ops.nn.dropout_keep_mask), its Numba kernel a twin; equal_shapes (train SMALL 1.026, quartiles
# 1.017-1.033): two equal shapes broadcast to themselves, ops.shapes.broadcast_shape's first line;
# fused_cross_entropy (train SMALL 1.056, quartiles 1.03-1.07; AMD EPYC, 2026-12-01): cross-entropy's backward
# is its direct formula w·(softmax − q), nn.functional.cross_entropy_backward (one array written, not the three
# of dy = −w·q run through log_softmax's backward), its Numba kernel (kernels.cross_entropy) a twin.

# ---------------------------------------------------------------- fused_residual, fused_ffn, fused_attention
# The switches of the step compiler's rewrite rules (tinygrad_lite/compiler/rules/: add_dropout, linear_relu_dropout,
# attention; each rule's file gives its measured gain). The paper's boxes write these ops plain (transformer.add_norm,
# transformer.feed_forward, transformer.attention) and never branch on them; a compiled step, which both trainers run
# by default, fuses them into nn.fused's ops, and a switch turned off leaves them plain in the plan: the rule's oracle
# (tests/test_compile_rules*.py). Eager steps run them plain. The padding skip's rows (below) run all heads of
# attention in one op, nn.fused.fused_attention, whichever the switch.

# ---------------------------------------------------------------- attention_kernels
# Why: training small 17% faster (train small off/on 1.165, quartiles 1.16-1.18; tiny 1.16; CPU clock, 2026-12-03,
# AMD EPYC AVX2): inside fused attention, the per-query Numba kernel where a head has one query (decoding), the
# SIMD tile kernels for float32 training shapes (read in place on the real tokens' rows), else BLAS around the
# Numba softmax. The branch is in nn.functional._attention_engines; plain version: the NumPy twin, matmul ->
# softmax -> matmul (kernels.attention_composed; the rows put back in the padded layout for `real`), on either
# backend (tests/test_fast_paths.py).

# ---------------------------------------------------------------- decoder_kernel
# Why: greedy decoding 7.7x faster (decode small b1 off/on 7.74, quartiles 7.12-8.74, one run, wall clock): the
# encoder, and each decoder step (all layers, cached K/V, generator), as one Numba call instead of ~100 and ~200
# Tensor ops. It lives in the translator's machinery, transformer/fast/decoder_kernel.py (tinygrad_lite never
# imports transformer); the branch is in transformer/fast/decoder_steps.py, which the translator asks for the
# steps it passes transformer.decoding; plain version: decoding.CachedSteps (model.encode and model.decode with
# the key/value cache), its oracle within float rounding (tests/test_decoder_kernel.py).

# ---------------------------------------------------------------- decoder_layouts
# Why: greedy decoding at 64 rows 14% faster (decode small b64 off/on 1.14, three runs 1.09-1.19, CPU clock,
# 2026-12-03, AMD EPYC without AVX-512; b1 unchanged: one row multiplies by np.dot either way): the decoder
# kernel's weight layouts by row count, (in, out) from TRANSPOSED_FROM_ROWS rows, packed into kernels.panels'
# AVX-512 panels from PANELS_FROM_ROWS rows (float32, an AVX-512 CPU), and float32 products of 2+ rows through the
# sgemm of NumPy's bundled OpenBLAS (1.4-2.1x SciPy's at 2-32 rows). The branch is in
# transformer/fast/decoder_weights.layout_for; plain version: the Linears' (out, in) weights and np.dot at every
# row count, its oracle within float32 rounding (tests/test_decoder_kernel.py).

# ---------------------------------------------------------------- skip_padding

# Why: training small 21% faster (train small off/on 1.21, base-short 1.18; CPU clock, 2026-12-01) at 25% <pad>.
# A padded batch's position-wise layers (embeddings, projections, FFN, norms, generator) run on the rows that can
# move the loss only, and attention among them (nn.fused.fused_attention_rows_op). A compiled step: the compiler's
# rule skip_padding (tinygrad_lite/compiler/rules/skip_padding.py), read from the plain padded program, 3-4% faster
# than the hand-written rows forward it replaced (TINY, SMALL; 2026-12-07, Xeon AVX-512), which is gone: a step run
# op by op (--no-compile, the loss on dev) runs the padded forward. Plain version: the padded forward, its oracle
# (tests/test_compile_rule_skip_padding.py).

# ---------------------------------------------------------------- flat_optimizer
# Why: see the rule's file (tinygrad_lite/compiler/rules/flat_optimizer.py) and bench/README.md, "Step compiler": a
# compiled step's Adam runs one kernel call a parameter group over flat arrays, its parameters, gradients, m and v
# views of them. Eager steps run optim.adam's loop, a call a parameter; plain version: that loop, bit for bit the same
# (tests/test_compile_rule_flat_optimizer.py).

# ---------------------------------------------------------------- panel_products
# Why: training small 35% faster (train small off/on 1.345, quartiles 1.34-1.37; base-short 1.44, tiny 1.07;
# CPU clock, 2026-12-03, AMD Zen 5 with OPENBLAS_CORETYPE=Haswell): a Linear's three products (x·Wᵀ, g·W, gᵀ·x) on
# kernels.panels' 16-float micro-kernel, 230 GFLOP/s where that OpenBLAS runs 8-float kernels at 110. Only
# where kernels.panels.beats_blas says so (float32, 32+ rows and columns, 1 thread, Numba, an AVX-512 CPU,
# an OpenBLAS of 8-float kernels): OpenBLAS's own AVX-512 kernels are as fast and need no packing (small
# off/on 0.89 if forced there). A Linear's product is the op linear_product (nn.functional._product, the formula
# `a @ b`); the branch is in its Numba twin, kernels.panels.linear_product_numba (BLAS's `a @ b` where the trick is
# off or the panels do not pay); its oracle within float32 rounding: the formula (tests/test_panels.py).

# ---------------------------------------------------------------- mkl_products
# Why: training base-short 15% faster, small 9% (train off/on base-short 1.148, quartiles 1.13-1.17; small 1.086,
# 1.06-1.10; tiny 1.007, control `none` 0.99-1.01; CPU clock, 2026-12-07, Xeon AVX-512): a Linear's three products on
# Intel's oneMKL, the BLAS torch multiplies with, 9-11% faster than NumPy's OpenBLAS at these shapes. Only where the
# `mkl` wheel is installed (the extra `mkl`) and kernels.mkl.serves says so (2-D float operands, C-ordered or
# transposed, 1 thread: MKL runs sequential; an Intel CPU, where it was measured); the branch is in the Numba twin
# of linear_product, kernels.panels.linear_product_numba, after the panels'; its oracle within rounding: the formula
# (tests/test_mkl.py).
# ---------------------------------------------------------------- gpt_kernel
# Why: GPT sampling 4.9-6.4x faster (bench/gpt_sample.py, ours/ours-plain: greedy 6.37, sampled 4.88, 7 alternating
# runs of 500 tokens, CPU clock, 1 thread, 2026-12-03, AMD EPYC AVX2, nanoGPT's CPU recipe): the GPT's cached forward
# (all blocks, the new tokens' K/V into the cache, the last position's logits) as one Numba call instead of ~60
# module calls and ~150 Tensor ops a token. It lives in transformer/fast/gpt_kernel.py; the branch is in
# transformer.gpt.sampling.Context; plain version: GPT.forward with its KeyValueBuffer cache, its oracle within
# float rounding (tests/test_gpt_sampling.py).
