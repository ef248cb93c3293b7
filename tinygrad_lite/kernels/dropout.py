"""The Numba twin of dropout's keep mask: lanes of counter-based SplitMix64 words, each compared
with a threshold.

The formula is the op's own, ops.nn.keep_mask_from_seed (word i of the stream from state `seed` is
splitmix64_mix(seed + i·GAMMA), cut into 64 // bits lanes, lowest bits first; a lane >= threshold
is kept); kernels.TWINS registers keep_mask_from_seed_numba below, which the numba backend runs
instead (tinygrad_lite.dispatch). It adds the gamma word by word (the same sums mod 2**64) into a
scratch block of BLOCK words, then compares the block's lanes, both loops SIMD: ~0.3 ns an entry
against ~1 ns for NumPy's PCG64 raw words and a compare. Both give the same bits
(tests/test_dropout_kernel.py). The caller (ops.nn.dropout_keep_mask) draws the seed from the
engine's rng and picks bits and threshold. keep_rows_from_seed_numba is the twin of the same mask's
rows of a padded tensor (compiler/rules/skip_padding.py, keep_rows_from_seed): only their words.
"""
import numpy as np

from ..ops.nn import GAMMA, LANE_DTYPES, splitmix64_mix
from .backend import lazy_kernels

BLOCK = 512  # words per pass of the Numba kernel (4 KiB of scratch, in L1)


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use kernel (one thread): BLOCK words at a time into a scratch array, then
    its lanes (a uint16 or uint32 view of the scratch) compared into the mask; both loops vectorise.
    The kernel reaches splitmix64_mix by its module-level name, not a closure: Numba keys its
    on-disk cache on the pickled closure, which a jit function in it would change from run to run."""
    from numba.extending import register_jitable
    register_jitable(inline="always")(splitmix64_mix)

    @numba.njit(cache=True)
    def keep_mask(seed, threshold, words, lanes, out):
        per_word = lanes.size // words.size
        n_words = -(-out.size // per_word)
        z = seed
        for start in range(0, n_words, words.size):
            stop = min(start + words.size, n_words)
            for i in range(stop - start):
                z += GAMMA
                words[i] = splitmix64_mix(z)
            block = out[start * per_word:min(stop * per_word, out.size)]
            for k in range(block.size):
                block[k] = lanes[k] >= threshold

    @numba.njit(cache=True)
    def keep_rows(seed, threshold, rows, width, words, lanes, out):
        per_word = lanes.size // words.size
        for i in range(rows.size):
            first = rows[i] * width
            w0 = first // per_word
            z = seed + np.uint64(w0) * GAMMA
            for w in range((first + width - 1) // per_word - w0 + 1):
                z += GAMMA
                words[w] = splitmix64_mix(z)
            row = lanes[first - w0 * per_word:first - w0 * per_word + width]
            block = out[i * width:(i + 1) * width]
            for j in range(width):
                block[j] = row[j] >= threshold

    return keep_mask, keep_rows


def keep_mask_from_seed_numba(seed, count, bits, threshold):
    """bool (count,): the words' lanes >= threshold (Numba kernel)."""
    assert bits in LANE_DTYPES and 0 <= threshold < 2 ** bits, (bits, threshold)
    dtype = LANE_DTYPES[bits]
    out = np.empty(count, np.bool_)
    if count:
        words = np.empty(BLOCK, np.uint64)
        _numba_kernels()[0](np.uint64(seed), dtype(threshold), words, words.view(dtype), out)
    return out


def keep_rows_from_seed_numba(seed, rows, width, bits, threshold):
    """bool (len(rows), width): the lanes at rows of a padded (rows, width) mask (Numba kernel, a row's
    words into a scratch array, then its lanes compared)."""
    assert bits in LANE_DTYPES and 0 <= threshold < 2 ** bits, (bits, threshold)
    dtype = LANE_DTYPES[bits]
    out = np.empty((len(rows), width), np.bool_)
    if out.size:
        words = np.empty(width * bits // 64 + 2, np.uint64)
        _numba_kernels()[1](np.uint64(seed), dtype(threshold), np.ascontiguousarray(rows, np.int64), width, words,
                            words.view(dtype), out.reshape(-1))
    return out

