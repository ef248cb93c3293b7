"""Memory kept between decodes, so that a decode does not fault fresh pages in (DecodeMemory)."""
from __future__ import annotations

import math
import threading

import numpy as np


class DecodeMemory:
    """The arrays of one decode (stacked parameters, caches), cut from a block of memory that is
    kept for the next decode in the same thread.

    Fresh arrays of a few MB (64 sentences, 32 tokens, SMALL: ~10 MB) come from new mmaps, whose
    pages fault in one by one at their first write: ~1,500 faults and 5-12 ms of a ~90 ms decode
    (bench/README.md, "Ninth pass"). A decode that reuses the previous one's memory finds its pages
    mapped, as PyTorch's and CTranslate2's caching allocators keep theirs. A DecoderKernel takes the
    block when it is made and gives it back when it is dropped; a kernel made while another holds
    the block gets memory of its own. When a decode needs more than the block holds, the rest comes
    from NumPy, and the next decode takes a block of the new size. `release_decode_memory()`
    returns the kept block to the system.
    """

    _kept = threading.local()  # .block: the uint8 array this thread keeps (or None); .need: bytes
    ALIGN = 64

    def __init__(self, block):
        self.block, self.used = block, 0

    @classmethod
    def take(cls) -> "DecodeMemory":
        block, need = getattr(cls._kept, "block", None), getattr(cls._kept, "need", 0)
        cls._kept.block = None
        if need and (block is None or block.nbytes < need):
            block = np.empty(need + cls.ALIGN, np.uint8)
            block = block[-block.ctypes.data % cls.ALIGN:][:need]  # starts on an ALIGN boundary
        return cls(block)

    def empty(self, shape, dtype) -> np.ndarray:
        """An uninitialised C-contiguous array, from the block while it lasts."""
        dtype = np.dtype(dtype)
        start, size = self.used, math.prod(shape) * dtype.itemsize
        self.used = start + -(-size // self.ALIGN) * self.ALIGN
        if self.block is None or self.used > self.block.nbytes:
            return np.empty(shape, dtype)
        return self.block[start:start + size].view(dtype).reshape(shape)

    def give_back(self):
        """Keep the block (the larger one, if the thread kept another meanwhile) and what was used."""
        kept = getattr(self._kept, "block", None)
        if self.block is not None and (kept is None or kept.nbytes < self.block.nbytes):
            self._kept.block = self.block
        self._kept.need = max(getattr(self._kept, "need", 0), self.used)
        self.block = None


def release_decode_memory():
    """Return the memory that this thread keeps for decoding (see DecodeMemory) to the system."""
    DecodeMemory._kept.block = None
    DecodeMemory._kept.need = 0
