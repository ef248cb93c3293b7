"""CPU kernels for the Transformer's hot spots: Numba twins of single ops, and the machinery that
fuses several.

An op's formula lives in its op file, in NumPy: softmax, log_softmax, layer norm and dropout's
counter-based keep mask in tinygrad_lite/ops/nn.py, GELU in ops/unary.py, cross-entropy's and the
embedding's gradients, a Linear and its product in nn/functional.py, Adam's update in optim/adam.py.
TWINS (kernels.twins) registers the Numba kernel that computes the same op faster, and the op
file's `@has_twin` line runs it under the numba backend (tinygrad_lite.dispatch); the formula is
the twin's test oracle. The rest is machinery whose NumPy twins compose several ops: attention
(per-query, SIMD tiles), fused dropout chains, the decoder's packed panels. Matmul is the op's
np.matmul (OpenBLAS, ops/binary.py) on both backends: a Numba matmul measured 4.7-9.3x slower
than OpenBLAS at every size (bench/README.md). Numba products run only where they measured
faster: attention's per-head products in float32 (kernels.simd's micro-kernels, in the tile
kernels) and, on AVX-512 CPUs whose OpenBLAS runs 8-float kernels, a Linear's training products
(kernels.panels, the twin of linear_product, where panels.beats_blas says so; decoding's products
in transformer's decoder kernel).
All functions take and return NumPy arrays (float32 or float64), never Tensors, and trust
them: the Tensor methods and nn.functional check what users pass.

    softmax_forward, softmax_backward, log_softmax_forward, log_softmax_backward, layernorm_forward,
    layernorm_backward, gelu_forward, gelu_and_slope, cross_entropy_backward, embedding_backward,
    adam_update, keep_mask_from_seed, linear_product, linear
                                               the ops in TWINS as the backend runs them (dispatch.op)
    attention_forward(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0) -> (out, weights)
    attention_backward(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0) -> (dq, dk, dv)
    attention_forward_rows / attention_backward_rows: the same on the real tokens' rows (n, h, d), no padding
    attention_engine(queries) -> 'numba' | 'blas'             the per-query kernel's rule (kernels.attention)
    add_dropout, dropout_backward, bias_relu_dropout_, relu_dropout_backward   fused chains (kernels.fused)
    panels.pack_panels(w) / panels.panel_product(...)          x·Wᵀ + b with W packed once (AVX-512; decoding)
    panels.linear_product_numba(a, b) / panels.beats_blas(a, b)  a · b on it (training, if BLAS has 8-float kernels)
    linear_layer.linear_op_numba(x, w, b, needs)   a Linear, each way one call to ?gemm (kernels.cblas) and its bias

Backend: env var TINYGRAD_LITE_BACKEND=numba|numpy, or set_backend / use_backend at run time.
Importing this package neither imports numba nor compiles anything; that happens on first use.
The Numba twins live in the submodules, e.g. ``tinygrad_lite.kernels.softmax.softmax_forward_numba``.
"""
from .attention import (
                        attention_backward,
                        attention_backward_rows,
                        attention_engine,
                        attention_forward,
                        attention_forward_rows,
)
from .backend import BACKENDS, ENV_VAR, get_backend, set_backend, use_backend
from .fused import add_dropout, bias_relu_dropout_, dropout_backward, relu_dropout_backward
from .twins import TWINS

__all__ = [
    "BACKENDS", "ENV_VAR", "add_dropout", "attention_backward", "attention_backward_rows", "attention_forward_rows",
    "bias_relu_dropout_",
    "dropout_backward",
    "relu_dropout_backward", "attention_engine", "attention_forward", "get_backend",
    "set_backend", "TWINS", "use_backend",
]


def __getattr__(name):
    """kernels.softmax_forward and the other ops in TWINS: the op as the backend runs it (its Numba
    twin, or its formula in its op file), for the machinery's callers."""
    if name in TWINS:
        from ..dispatch import op
        return op(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
