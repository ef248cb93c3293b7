"""Dims, shapes and dtypes: how every op family reads its dim=, shape and dtype arguments, so a bad
one gets the same words whichever op it reached ("sum: dim 3 is out of range ...")."""
from __future__ import annotations

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
"""The dtypes a tensor can require grad in."""


def norm_dim(op: str, dim: int, ndim: int) -> int:
    """`dim` as a non-negative axis; negative dims count from the end, as in PyTorch."""
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise ValueError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dims "
                         f"(expected a dim in [{lo}, {hi}])")
    return dim % max(ndim, 1)


def norm_dims(op: str, dim, ndim: int):
    """None -> all axes; int or sequence -> a tuple of non-negative axes."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    return tuple(sorted(norm_dim(op, d, ndim) for d in dims))


def broadcast_shape(op: str, *shapes) -> tuple:
    """The shape `shapes` broadcast to, or an error naming `op` and the shapes. Two equal shapes
    broadcast to themselves (most calls: no np.broadcast_shapes, ~2 us)."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"{op}: shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                         "cannot be broadcast together (NumPy broadcasting rules)") from None


def shape_arg(shape) -> tuple:
    """A shape given as ints, or as one tuple or list of them, as a tuple of ints."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for n in shape:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"shape entries must be ints, got {shape}")
    return tuple(int(n) for n in shape)


def check_same_dtype(op, tensors):
    """Refuse to join tensors of different dtypes."""
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise TypeError(f"{op}: tensors have mixed dtypes {sorted(map(str, dtypes))}; convert them first")
