"""Row-wise parts the decoding kernels share (transformer/fast/decoder_kernel.py, gpt_kernel.py):
plain Python that Numba compiles inline into each kernel once register_numba() has run."""
from __future__ import annotations

import math

import numpy as np

from tinygrad_lite.kernels.backend import FASTMATH, lazy_kernels


def layer_norm_rows(x, weight, bias, eps):
    """Each row: (x - mean) / sqrt(var + eps) · weight + bias (biased variance, as PyTorch)."""
    y = np.empty_like(x)
    d = x.shape[1]
    for r in range(x.shape[0]):
        total = 0.0
        for j in range(d):
            total += x[r, j]
        mean = total / d
        square = 0.0
        for j in range(d):
            square += (x[r, j] - mean) ** 2
        rstd = 1.0 / math.sqrt(square / d + eps)
        for j in range(d):
            y[r, j] = (x[r, j] - mean) * rstd * weight[j] + bias[j]
    return y


@lazy_kernels
def _registered(numba):
    from numba.extending import register_jitable
    register_jitable(fastmath=FASTMATH)(layer_norm_rows)
    return True


def register_numba() -> None:
    """Make layer_norm_rows callable from Numba kernels (once per process)."""
    _registered()
