"""CPU kernels for the Transformer's hot spots, each as a Numba JIT kernel and a NumPy twin.

The twins are the readable definitions; the Numba kernels are the fast path and are tested
against them. `matmul` is np.matmul (OpenBLAS) on both backends; Numba products run only where they
measured faster: attention's per-head products in float32 (kernels.simd's micro-kernels, in the tile
kernels) and, on AVX-512 CPUs whose OpenBLAS runs 8-float kernels, a Linear's training products
(kernels.panels, where panels.beats_blas says so; decoding's products in transformer's decoder kernel).
All functions take and return NumPy arrays (float32 or float64), never Tensors, and trust
them: the Tensor methods and nn.functional check what users pass.

    matmul(a, b, trans_a=False, trans_b=False) -> c          batched, broadcast, fused transposes
    matmul_backward(a, b, dc, trans_a=False, trans_b=False) -> (da, db)
    softmax_forward(x, scale=1.0, mask=None) -> y             last axis, masks, stable
    softmax_backward(y, dy, scale=1.0) -> dx
    log_softmax_forward(x) -> y,  log_softmax_backward(y, dy) -> dx
    layernorm_forward(x, gamma, beta, eps=1e-5) -> (y, mean, rstd)
    layernorm_backward(dy, x, gamma, mean, rstd) -> (dx, dgamma, dbeta)
    attention_forward(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0) -> (out, weights)
    attention_backward(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0) -> (dq, dk, dv)
    attention_forward_rows / attention_backward_rows: the same on the real tokens' rows (n, h, d), no padding
    attention_engine(queries) -> 'numba' | 'blas'             the per-query kernel's rule (kernels.attention)
    add_dropout, dropout_backward, bias_relu_dropout_, relu_dropout_backward   fused chains (kernels.fused)
    gelu_forward(x, approximate) -> y,  gelu_and_slope(x, approximate) -> (y, dy/dx)   GELU (kernels.gelu)
    cross_entropy_backward(logp, targets, weight, eps) -> dx   label-smoothed CE's gradient in one pass
    keep_mask_from_seed(seed, count, bits, threshold) -> keep  dropout mask from SplitMix64 words (kernels.dropout)
    embedding_backward(ids, g, num_rows) -> dw                 the rows of g summed per id
    panels.pack_panels(w) / panels.panel_product(...)          x·Wᵀ + b with W packed once (AVX-512; decoding)
    panels.panel_matmul_numba(a, b) / panels.beats_blas(a, b)  a · b on it (training, if BLAS has 8-float kernels)

Backend: env var TINYGRAD_LITE_BACKEND=numba|numpy, or set_backend / use_backend at run time.
Importing this package neither imports numba nor compiles anything; that happens on first use.
The explicit twins live in the submodules, e.g. ``tinygrad_lite.kernels.softmax``'s
``softmax_forward_numpy`` and ``softmax_forward_numba``. Note that the name ``matmul`` here is
the function; import the module's twins with ``from tinygrad_lite.kernels.matmul import ...``.
"""
from .attention import (
                        attention_backward,
                        attention_backward_rows,
                        attention_engine,
                        attention_forward,
                        attention_forward_rows,
)
from .backend import BACKENDS, ENV_VAR, get_backend, set_backend, use_backend
from .cross_entropy import cross_entropy_backward
from .dropout import keep_mask_from_seed
from .embedding import embedding_backward
from .fused import add_dropout, bias_relu_dropout_, dropout_backward, relu_dropout_backward
from .gelu import gelu_and_slope, gelu_forward
from .layernorm import layernorm_backward, layernorm_forward
from .matmul import matmul, matmul_backward
from .softmax import log_softmax_backward, log_softmax_forward, softmax_backward, softmax_forward

__all__ = [
    "BACKENDS", "ENV_VAR", "add_dropout", "attention_backward", "attention_backward_rows", "attention_forward_rows",
    "bias_relu_dropout_", "cross_entropy_backward",
    "dropout_backward", "embedding_backward", "gelu_and_slope", "gelu_forward", "keep_mask_from_seed",
    "relu_dropout_backward", "attention_engine", "attention_forward", "get_backend",
    "layernorm_backward", "layernorm_forward",
    "log_softmax_backward", "log_softmax_forward", "matmul", "matmul_backward",
    "set_backend", "softmax_backward", "softmax_forward", "use_backend",
]
