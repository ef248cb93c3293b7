"""Embedding: a lookup table from token ids to d_model-sized vectors (the paper's §3.4)."""
from __future__ import annotations

import numpy as np

from ..checks import float_dtype, is_int, positive_int
from . import functional as F
from . import init
from .module import Module, Parameter


class Embedding(Module):
    """weight (num_embeddings, embedding_dim) ~ N(0, 1) as in PyTorch.

    With `padding_idx`, that row starts at zero and its gradient is always zero, so padding tokens
    map to the zero vector for the whole of training. Ids may be an int ndarray or an int Tensor;
    an id outside [0, num_embeddings) raises IndexError naming the id and the vocab size.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 dtype=np.float32):
        super().__init__()
        dtype = float_dtype("Embedding", dtype)
        self.num_embeddings = positive_int("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = positive_int("Embedding", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            n = self.num_embeddings
            if not is_int(padding_idx) or not -n <= padding_idx < n:
                raise ValueError(f"Embedding: padding_idx {padding_idx!r} is out of range for num_embeddings={n} "
                                 f"(expected an int in [-{n}, {n}))")
            padding_idx = int(padding_idx) % n
        self.padding_idx = padding_idx
        self.weight = init.normal_(Parameter(np.empty((self.num_embeddings, self.embedding_dim), dtype)))
        if padding_idx is not None:
            self.weight.data[padding_idx] = 0

    def forward(self, ids):
        return F.embedding(ids, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"
