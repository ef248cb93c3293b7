"""Neural-network layers on top of Tensor, with PyTorch's names and semantics:
Parameter and Module (registration, state_dict, train/eval), the layers the Transformer needs
(Linear, Embedding, LayerNorm, Dropout, activations, containers) and `functional` (losses)."""
from . import functional, fused, init
from .activation import GELU, ReLU, Sigmoid, Tanh
from .container import MLP, ModuleList, Sequential
from .dropout import Dropout
from .embedding import Embedding
from .linear import Linear
from .module import IncompatibleKeys, Module, Parameter
from .normalization import LayerNorm

__all__ = [
    "GELU",
    "MLP",
    "Dropout",
    "Embedding",
    "IncompatibleKeys",
    "LayerNorm",
    "Linear",
    "Module",
    "ModuleList",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Tanh",
    "functional",
    "fused",
    "init",
]
