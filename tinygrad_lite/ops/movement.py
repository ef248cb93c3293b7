"""Movement ops: reshape, flatten, permute, transpose, squeeze, expand, indexing (t[...]), cat,
stack, split and chunk. They move or select elements without computing new values, so each
backward moves the gradient back to where its elements came from."""
from __future__ import annotations

import numpy as np

from .. import tensor
from .binary import unbroadcast
from .shapes import check_same_dtype, norm_dim, shape_arg


class MovementOps:
    """The shape, indexing and joining methods of Tensor (a mixin: Tensor inherits them)."""

    __slots__ = ()

    # ------------------------------------------------------------ shape

    def reshape(self, *shape):
        """Returns the elements in a new shape (one dim may be -1), like torch.reshape. `view` is
        the same."""
        shape = shape_arg(shape)
        try:
            return self._apply(reshape_op, "reshape", (self,), shape)
        except ValueError:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {self.shape} ({self.numel()} elements) "
                             f"into {shape}") from None

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        """Returns dims start_dim .. end_dim merged into one (a 0-d tensor becomes 1-d), like
        torch.flatten."""
        if self.ndim == 0:
            return self.reshape(1)
        s = norm_dim("flatten", start_dim, self.ndim)
        e = norm_dim("flatten", end_dim, self.ndim)
        return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1:])

    def permute(self, *dims):
        """Returns the dims reordered as `dims`, like torch.permute."""
        dims = shape_arg(dims)
        if len(dims) != self.ndim:
            raise ValueError(f"permute: got {len(dims)} dims {dims} for a tensor with {self.ndim} dims")
        dims = tuple(norm_dim("permute", d, self.ndim) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ValueError(f"permute: {dims} is not a permutation of the {self.ndim} dims")
        return self._apply(permute_op, "permute", (self,), dims)

    def transpose(self, dim0: int = -2, dim1: int = -1):
        """Returns dims dim0 and dim1 swapped (the last two by default), like torch.transpose."""
        d0, d1 = norm_dim("transpose", dim0, self.ndim), norm_dim("transpose", dim1, self.ndim)
        return self._apply(transpose_op, "transpose", (self,), d0, d1)

    def t(self):
        """Returns a 2-d tensor transposed; other tensors as they are (torch.t refuses more than 2
        dims)."""
        return self.transpose(0, 1) if self.ndim == 2 else self

    def unsqueeze(self, dim: int):
        """Returns the tensor with a size-1 dim inserted at `dim`, like torch.unsqueeze."""
        d = norm_dim("unsqueeze", dim, self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def squeeze(self, dim=None):
        """Returns the tensor without its size-1 dims (only `dim` if given, when it has size 1),
        like torch.squeeze."""
        if dim is None:
            return self.reshape(tuple(n for n in self.shape if n != 1))
        d = norm_dim("squeeze", dim, self.ndim)
        if self.shape[d] != 1:
            return self
        return self.reshape(self.shape[:d] + self.shape[d + 1:])

    def expand(self, *shape):
        """Returns size-1 dims broadcast to `shape` without copying (-1 keeps a size), like
        torch.Tensor.expand."""
        shape = shape_arg(shape)
        if len(shape) < self.ndim:
            raise ValueError(f"expand: target {shape} has fewer dims than the tensor's {self.shape}")
        full = tuple(self.shape[i - (len(shape) - self.ndim)] if n == -1 else n for i, n in enumerate(shape))
        try:
            return self._apply(expand_op, "expand", (self,), full)
        except ValueError:
            raise ValueError(f"expand: cannot expand shape {self.shape} to {shape}; only size-1 dims "
                             "can grow") from None

    @property
    def T(self):
        """The last two dims swapped (0-d and 1-d tensors as they are): torch's .mT, which is .T
        for a matrix."""
        return self.transpose(-2, -1) if self.ndim >= 2 else self

    # ------------------------------------------------------------ indexing

    def __getitem__(self, index):
        """t[index] with NumPy's basic and advanced indexing (ints, slices, None, lists, int or bool
        tensors); repeated indices add their gradients."""
        return self._apply(getitem_op, "getitem", (self,), _index_arg(index))

    # ------------------------------------------------------------ joining

    @staticmethod
    def cat(tensors, dim: int = 0):
        """Returns `tensors` joined along the existing dim `dim`, like torch.cat."""
        tensors = list(tensors)
        if not tensors:
            raise ValueError("cat: expected a non-empty list of tensors")
        d = norm_dim("cat", dim, tensors[0].ndim)
        shapes = [t.shape for t in tensors]
        for s in shapes:
            if len(s) != len(shapes[0]) or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != d):
                raise ValueError(f"cat: shapes {shapes} must match except in dim {d}")
        check_same_dtype("cat", tensors)
        return tensors[0]._apply(cat_op, "cat", tuple(tensors), d)

    @staticmethod
    def stack(tensors, dim: int = 0):
        """Returns `tensors` (all of one shape) joined along a new dim `dim`, like torch.stack."""
        tensors = list(tensors)
        if not tensors:
            raise ValueError("stack: expected a non-empty list of tensors")
        shapes = {t.shape for t in tensors}
        if len(shapes) != 1:
            raise ValueError(f"stack: all tensors must have the same shape, got {sorted(shapes)}")
        d = norm_dim("stack", dim, tensors[0].ndim + 1)
        return MovementOps.cat([t.unsqueeze(d) for t in tensors], dim=d)

    def split(self, split_size_or_sections, dim: int = 0):
        """Like torch.split: chunks of a given size, or a list of sizes."""
        d = norm_dim("split", dim, self.ndim)
        n = self.shape[d]
        if isinstance(split_size_or_sections, int):
            if split_size_or_sections <= 0:
                raise ValueError(f"split: split size must be positive, got {split_size_or_sections}")
            sizes = [split_size_or_sections] * (n // split_size_or_sections)
            if n % split_size_or_sections:
                sizes.append(n % split_size_or_sections)
        else:
            sizes = list(split_size_or_sections)
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise ValueError(f"split: sizes {sizes} must be non-negative and sum to {n} (dim {d})")
        out, start = [], 0
        for s in sizes:
            index = (slice(None),) * d + (slice(start, start + s),)
            out.append(self[index])
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0):
        """Returns up to `chunks` pieces of ceil(size / chunks) along `dim` (the last may be
        smaller), like torch.chunk."""
        n = self.shape[norm_dim("chunk", dim, self.ndim)]
        return self.split(-(-n // chunks), dim)


def _index_arg(index):
    if isinstance(index, tensor.Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, tensor.Tensor) else (np.asarray(i) if isinstance(i, list) else i)
                     for i in index)
    if isinstance(index, list):
        return np.asarray(index)
    return index


# ---------------------------------------------------------------- the ops: output, and its backward

def reshape_op(x, shape):
    return x.reshape(shape), lambda g: (g.reshape(x.shape),)


def permute_op(x, dims):
    return x.transpose(dims), lambda g: (g.transpose(np.argsort(dims)),)    # the inverse permutation


def transpose_op(x, d0, d1):
    return np.swapaxes(x, d0, d1), lambda g: (np.swapaxes(g, d0, d1),)


def expand_op(x, shape):
    return np.broadcast_to(x, shape), lambda g: (unbroadcast(g, x.shape),)


def getitem_op(x, idx):
    """x[idx]; its backward puts the gradient back where the elements came from, adding at repeated
    indices (np.add.at) when idx holds arrays (NumPy's advanced indexing)."""
    try:
        out = x[idx]
    except IndexError as e:
        raise IndexError(f"getitem: index {_describe_index(idx)} is out of bounds for a tensor "
                         f"of shape {x.shape} ({e})") from None

    def backward(g):
        full = np.zeros(x.shape, dtype=x.dtype)
        if _is_advanced(idx):
            np.add.at(full, idx, g)
        else:
            full[idx] = g
        return (full,)
    return (out if isinstance(out, np.ndarray) else np.asarray(out)), backward


def cat_op(*args):
    *xs, d = args
    cuts = np.cumsum([x.shape[d] for x in xs])[:-1]
    return np.concatenate(xs, axis=d), lambda g: tuple(np.split(g, cuts, axis=d))


def _is_advanced(idx) -> bool:
    parts = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(p, np.ndarray) for p in parts)


def _describe_index(idx) -> str:
    if isinstance(idx, np.ndarray):
        return f"tensor(shape={idx.shape}, min={idx.min() if idx.size else None}, " \
               f"max={idx.max() if idx.size else None})"
    return repr(idx)
