"""tinygrad-lite: a deep-learning engine built from scalars up.

Layers, each resting on the one below:
  scalar.Value (scalar autograd) -> tensor.Tensor (n-d autograd on NumPy)
  -> kernels (Numba JIT + NumPy twins) -> nn -> optim
Importing the package compiles nothing: Numba kernels compile on first use.

Two floors have an MLP, so neither is exported here: the scalar one (micrograd's, on Values) is
`tinygrad_lite.scalar.MLP` (`from tinygrad_lite.scalar import Value, MLP`, as micrograd's
`micrograd.nn.MLP`), the Tensor one `tinygrad_lite.nn.MLP`.
"""
from . import nn, optim, scalar
from .autograd import AnomalyError, detect_anomaly, enable_grad, is_grad_enabled, no_grad, retain_grads
from .checkpoint import load, save
from .gradcheck import GradcheckError, gradcheck
from .memory import keep_freed_memory
from .random import manual_seed
from .scalar import Value
from .tensor import Tensor, arange, cat, full, ones, ones_like, rand, randn, stack, tensor, where, zeros, zeros_like
from .threads import get_num_threads, set_num_threads

__all__ = [
    "Value",
    "Tensor", "tensor", "zeros", "ones", "full", "randn", "rand", "arange", "zeros_like", "ones_like",
    "cat", "stack", "where",
    "no_grad", "enable_grad", "is_grad_enabled", "detect_anomaly", "AnomalyError", "retain_grads",
    "manual_seed", "gradcheck", "GradcheckError", "set_num_threads", "get_num_threads", "keep_freed_memory",
    "nn", "optim", "scalar", "save", "load",
]

_SCALAR_ONLY = ("MLP", "Layer", "Neuron")


def __getattr__(name):
    """tinygrad_lite.MLP (and Layer, Neuron) used to be the scalar classes: say where they live now."""
    if name in _SCALAR_ONLY:
        tensor_twin = " (on Values), or tinygrad_lite.nn.MLP (on Tensors)" if name == "MLP" else ""
        raise AttributeError(f"module 'tinygrad_lite' has no attribute {name!r}: use "
                             f"tinygrad_lite.scalar.{name}{tensor_twin}")
    raise AttributeError(f"module 'tinygrad_lite' has no attribute {name!r}")
