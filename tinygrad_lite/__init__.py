"""tinygrad-lite: a deep-learning engine built from scalars up.

Layers, each resting on the one below:
  scalar.Value (scalar autograd) -> tensor.Tensor (n-d autograd on NumPy)
  -> kernels (Numba JIT + NumPy twins) -> nn -> optim
Importing the package compiles nothing: Numba kernels compile on first use.
"""
from .scalar import Value, Neuron, Layer, MLP
from .autograd import no_grad, enable_grad, is_grad_enabled, detect_anomaly, AnomalyError, retain_grads
from .random import manual_seed
from .tensor import Tensor, tensor, zeros, ones, full, randn, rand, arange, zeros_like, ones_like, cat, stack, where
from .gradcheck import gradcheck, GradcheckError
from .threads import set_num_threads, get_num_threads
from . import nn, optim
from .checkpoint import save, load

__all__ = [
    "Value", "Neuron", "Layer", "MLP",
    "Tensor", "tensor", "zeros", "ones", "full", "randn", "rand", "arange", "zeros_like", "ones_like",
    "cat", "stack", "where",
    "no_grad", "enable_grad", "is_grad_enabled", "detect_anomaly", "AnomalyError", "retain_grads",
    "manual_seed", "gradcheck", "GradcheckError", "set_num_threads", "get_num_threads",
    "nn", "optim", "save", "load",
]
