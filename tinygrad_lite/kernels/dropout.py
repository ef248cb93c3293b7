"""A dropout keep mask from one seed: counter-based SplitMix64 words cut into lanes, each lane compared
with a threshold.

Word i (i = 0, 1, ...) of the mask is SplitMix64's output after i + 1 steps from state `seed`
(Steele, Lea & Flood 2014; the generator that seeds xoshiro): no state runs from word to word, so
every word is computed on its own, in any order, on any thread, with the same result:

    z = seed + (i + 1) · 0x9E3779B97F4A7C15            (mod 2**64)
    z = (z ^ (z >> 30)) · 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) · 0x94D049BB133111EB
    word = z ^ (z >> 31)

Each word gives 64 // bits lanes, lowest bits first (entry 4i + j of a 16-bit mask is bits
16j..16j+15 of word i, as a little-endian uint16 view of the words reads them); an entry is kept
when its lane >= threshold, i.e. with probability 1 - threshold / 2**bits.

    keep_mask_from_seed(seed, count, bits, threshold) -> bool (count,)    bits 16 or 32

The NumPy twin is that formula on a uint64 array (wrapping arithmetic). The Numba kernel adds the
gamma word by word (the same sums mod 2**64) into a scratch block of BLOCK words, then compares the
block's lanes, both loops SIMD: ~0.3 ns an entry against ~1 ns for NumPy's PCG64 raw words and a
compare. Both give the same bits (tests/test_dropout_kernel.py). The caller
(fast.keep_mask_from_bits) draws the seed from the engine's rng and picks bits and threshold.
"""
import numpy as np

from .backend import lazy_kernels, use_numba

GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
LANE_DTYPES = {16: np.uint16, 32: np.uint32}
BLOCK = 512  # words per pass of the Numba kernel (4 KiB of scratch, in L1)


def _mix(z):
    """SplitMix64's output function of one state word (uint64, wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * MIX1
    z = (z ^ (z >> np.uint64(27))) * MIX2
    return z ^ (z >> np.uint64(31))


def splitmix64_words_numpy(seed, n_words):
    """The first n_words SplitMix64 outputs from state `seed`, as uint64 (NumPy twin)."""
    return _mix((np.arange(1, n_words + 1, dtype=np.uint64) * GAMMA) + np.uint64(seed))


def keep_mask_from_seed_numpy(seed, count, bits, threshold):
    """bool (count,): the words' lanes >= threshold (NumPy twin)."""
    dtype = LANE_DTYPES[bits]
    words = splitmix64_words_numpy(seed, -(-count // (64 // bits)))
    return words.view(dtype)[:count] >= dtype(threshold)


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use kernel (one thread): BLOCK words at a time into a scratch array, then
    its lanes (a uint16 or uint32 view of the scratch) compared into the mask; both loops vectorise.
    The kernel reaches _mix by its module-level name, not a closure: Numba keys its on-disk cache on
    the pickled closure, which a jit function in it would change from run to run."""
    from numba.extending import register_jitable
    register_jitable(inline="always")(_mix)

    @numba.njit(cache=True)
    def keep_mask(seed, threshold, words, lanes, out):
        per_word = lanes.size // words.size
        n_words = -(-out.size // per_word)
        z = seed
        for start in range(0, n_words, words.size):
            stop = min(start + words.size, n_words)
            for i in range(stop - start):
                z += GAMMA
                words[i] = _mix(z)
            block = out[start * per_word:min(stop * per_word, out.size)]
            for k in range(block.size):
                block[k] = lanes[k] >= threshold

    return keep_mask


def keep_mask_from_seed_numba(seed, count, bits, threshold):
    """bool (count,): the words' lanes >= threshold (Numba kernel)."""
    assert bits in LANE_DTYPES and 0 <= threshold < 2 ** bits, (bits, threshold)
    dtype = LANE_DTYPES[bits]
    out = np.empty(count, np.bool_)
    if count:
        words = np.empty(BLOCK, np.uint64)
        _numba_kernels()(np.uint64(seed), dtype(threshold), words, words.view(dtype), out)
    return out


def keep_mask_from_seed(seed, count, bits, threshold):
    """A keep mask of `count` entries from SplitMix64 words seeded by `seed` (uint64), each entry a
    `bits`-bit lane kept when >= threshold, on the selected backend."""
    impl = keep_mask_from_seed_numba if use_numba() else keep_mask_from_seed_numpy
    return impl(seed, count, bits, threshold)
