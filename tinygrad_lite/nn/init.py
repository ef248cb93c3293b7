"""Parameter initialisers (PyTorch's `torch.nn.init` names). Each fills a Tensor in place,
in its own dtype, from the engine's seeded generator (`tinygrad_lite.manual_seed`), and returns it."""
from __future__ import annotations

import math

import numpy as np

from .. import random as _random
from ..checks import one_of
from ..tensor import Tensor


def _fill(t: Tensor, values) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"init: expected a Tensor or Parameter, got {type(t).__name__}")
    t.data = np.asarray(np.broadcast_to(values, t.shape), dtype=t.dtype).copy()
    return t


def fan_in_and_fan_out(t: Tensor) -> tuple[int, int]:
    """For a weight of shape (out, in, *kernel): fan_in = in·kernel, fan_out = out·kernel."""
    if t.ndim < 2:
        raise ValueError(f"init: fan in/out need a tensor with at least 2 dims, got shape {t.shape}")
    receptive = int(np.prod(t.shape[2:])) if t.ndim > 2 else 1
    return t.shape[1] * receptive, t.shape[0] * receptive


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    return _fill(t, _random.rng().uniform(a, b, t.shape))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    return _fill(t, _random.rng().normal(mean, std, t.shape))


def constant_(t: Tensor, value: float) -> Tensor:
    return _fill(t, value)


def zeros_(t: Tensor) -> Tensor:
    return _fill(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    return _fill(t, 1.0)


def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    """U(−a, a) with a = gain·sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t: Tensor, gain: float = 1.0) -> Tensor:
    fan_in, fan_out = fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_uniform_(t: Tensor, a: float = 0.0, nonlinearity: str = "leaky_relu") -> Tensor:
    """U(−b, b) with b = gain·sqrt(3 / fan_in) (He et al., 2015). PyTorch's Linear default is
    a=sqrt(5), which makes b = 1/sqrt(fan_in)."""
    gains = {"leaky_relu": math.sqrt(2.0 / (1 + a * a)), "relu": math.sqrt(2.0), "tanh": 5.0 / 3,
             "sigmoid": 1.0, "linear": 1.0}
    gain = gains[one_of("kaiming_uniform_", "nonlinearity", nonlinearity, gains)]
    fan_in, _ = fan_in_and_fan_out(t)
    bound = gain * math.sqrt(3.0 / fan_in)
    return uniform_(t, -bound, bound)
