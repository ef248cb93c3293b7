"""Which steps the translator decodes with: the decoder kernels (decoder_kernel.py) or the textbook's.

transformer.decoding's greedy_decode and beam_search take the step machinery as `steps=`; their
default is the textbook's CachedSteps (the Tensor decoder with its key/value cache), the kernels'
test oracle. The translator asks `decoder_steps(model)` at each decode, so the switch
(`TRICKS.decoder_kernel`, tinygrad_lite/fast.py) and the backend are read where it is used.
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite.fast import TRICKS

from ..decoding import CachedSteps
from . import decoder_kernel


def decoder_steps(model):
    """kernel_steps where the decoder_kernel trick is on and the kernels implement `model` (Numba
    backend, the layers they know: decoder_kernel.supports), else CachedSteps."""
    if TRICKS.decoder_kernel and decoder_kernel.supports(model):
        return kernel_steps
    return CachedSteps


def kernel_steps(model, src: np.ndarray, src_mask: np.ndarray, rows: int, max_len: int):
    """A DecoderKernel built as decoding builds its steps: src (B, S) ids, src_mask (B, 1, 1, S)
    True = a real token; src is checked as model.encode checks it, with the plain path's error."""
    model._check_tokens("src", src, model.config.src_vocab)
    return decoder_kernel.DecoderKernel(model, src, src_mask[:, 0, 0, :], rows, max_len)


kernel_steps.calls_modules = False  # the kernels read the weights and run no module: no eval() walk
