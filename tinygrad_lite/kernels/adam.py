"""Adam's update of one parameter as one pass over its four arrays (parameter, gradient, m, v):
`adam_update_numba`, the Numba twin of tinygrad_lite.optim.adam.adam_update, the formula, about ten
passes, one per operation (what runs with TINYGRAD_LITE_BACKEND=numpy). kernels.TWINS registers it
(tinygrad_lite.dispatch). Both do the same float operations in the same order in the parameter's
dtype, so they agree to the last bit. On the paper's base model (53M parameters) the step is
memory-bound: one pass instead of ten is the difference (bench/README.md).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import dispatch
from .backend import lazy_kernels, threads_for


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use Numba kernel; returns it. No fastmath: the twin's rounding is kept."""

    @functools.partial(numba.njit, cache=True, parallel=True)
    def adam_update(param, grad, exp_avg, exp_avg_sq, one_minus_beta1, beta1, one_minus_beta2, beta2,
                    bias_correction2_sqrt, eps, step_size, weight_decay, decoupled_factor):
        for i in numba.prange(param.size):
            g = grad[i]
            if weight_decay != 0:
                g = g + weight_decay * param[i]
            p = param[i] * decoupled_factor
            v = exp_avg_sq[i] * beta2 + (g * g) * one_minus_beta2
            m = exp_avg[i] * beta1 + g * one_minus_beta1
            exp_avg_sq[i] = v
            exp_avg[i] = m
            param[i] = p - (m / (np.sqrt(v) / bias_correction2_sqrt + eps)) * step_size

    return adam_update


def adam_update_numba(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """One Adam step for one parameter, in place, as a single pass (Numba kernel). Arrays that are
    not C-contiguous, or whose dtypes differ, go to the formula."""
    dtype = param.dtype
    if not (param.flags.c_contiguous and grad.flags.c_contiguous and exp_avg.flags.c_contiguous
            and exp_avg_sq.flags.c_contiguous and grad.dtype == exp_avg.dtype == exp_avg_sq.dtype == dtype
            and dtype in (np.float32, np.float64)):
        return dispatch.formula("adam_update")(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps,
                                               weight_decay, decoupled, step)
    with threads_for(param.size):
        _numba_kernels()(param.reshape(-1), grad.reshape(-1), exp_avg.reshape(-1), exp_avg_sq.reshape(-1),
                         *_kernel_scalars(dtype, lr, beta1, beta2, eps, weight_decay, decoupled, step))


@functools.lru_cache(maxsize=64)
def _kernel_scalars(dtype, lr, beta1, beta2, eps, weight_decay, decoupled, step) -> tuple:
    """The kernel's scalar arguments in the parameter's dtype: the same for every parameter of a
    group at one step, so computed once (a step updates ~100 parameters)."""
    t = dtype.type
    coupled_decay = t(weight_decay if weight_decay and not decoupled else 0)
    decoupled_factor = t(1 - lr * weight_decay if weight_decay and decoupled else 1)
    return (t(1 - beta1), t(beta1), t(1 - beta2), t(beta2), t(math.sqrt(1 - beta2 ** step)), t(eps),
            t(lr / (1 - beta1 ** step)), coupled_decay, decoupled_factor)
