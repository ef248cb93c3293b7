"""gradcheck: analytic gradients against central finite differences, in float64."""
from __future__ import annotations

import numpy as np

from .tensor import Tensor


class GradcheckError(AssertionError):
    """Analytic and numeric gradients disagree; the message names the worst elements."""


def numerical_gradient(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences (f(x + eps) - f(x - eps)) / 2eps of the scalar f() with respect to
    every entry of the array x, which f reads: x is perturbed in place, one entry at a time, and
    left as it was. x must be C-contiguous, or the perturbations would land in a copy."""
    if not (isinstance(x, np.ndarray) and x.flags.c_contiguous and x.flags.writeable):
        raise ValueError("numerical_gradient: x must be a writeable C-contiguous ndarray (it is perturbed "
                         f"in place), got {type(x).__name__}"
                         + (f" with flags c_contiguous={x.flags.c_contiguous}, writeable={x.flags.writeable}"
                            if isinstance(x, np.ndarray) else ""))
    grad = np.zeros(x.shape)
    flat, grad_flat = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        orig = flat[i]
        flat[i] = orig + eps
        up = f()
        flat[i] = orig - eps
        down = f()
        flat[i] = orig
        grad_flat[i] = (up - down) / (2 * eps)
    return grad


def gradcheck(fn, *inputs: Tensor, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, seed: int = 0) -> bool:
    """Check d fn(*inputs) / d input for every input that requires grad.

    A non-scalar output is reduced to Σ w·out with fixed random weights w, so one
    backward pass checks the whole Jacobian-vector product. Inputs must be float64:
    float32 finite differences are too coarse to mean anything.
    """
    checked = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad; pass Tensors with requires_grad=True")
    for t in checked:
        if t.dtype != np.float64:
            raise TypeError(f"gradcheck: inputs must be float64 for finite differences, got {t.dtype} "
                            f"(shape {t.shape}); use Tensor(x, dtype=np.float64)")
    for t in checked:
        t.data = np.ascontiguousarray(t.data).reshape(t.shape)  # ascontiguousarray makes 0-d 1-d
    first = fn(*inputs)
    if not isinstance(first, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(first).__name__}")
    weights = np.random.default_rng(seed).standard_normal(first.shape)

    def objective() -> float:
        return float((fn(*inputs).data * weights).sum())

    for t in checked:
        t.grad = None
    (fn(*inputs) * Tensor(weights)).sum().backward()

    failures = []
    for i, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        analytic = np.zeros(t.shape) if t.grad is None else np.asarray(t.grad, dtype=np.float64)
        numeric = numerical_gradient(objective, t.data, eps)
        err = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
        if t.data.size and (err.max() > 0 or not np.isfinite(analytic).all()):
            worst = np.unravel_index(np.nanargmax(np.where(np.isfinite(err), err, np.inf)), t.shape)
            failures.append(f"input {i} (shape {t.shape}): worst element {tuple(int(w) for w in worst)} "
                            f"analytic {analytic[worst]:.8g} vs numeric {numeric[worst]:.8g}")
    if failures:
        if raise_exception:
            raise GradcheckError("gradcheck failed:\n  " + "\n  ".join(failures))
        return False
    return True
