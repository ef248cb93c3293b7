"""Dropout's keep mask from counter-based SplitMix64 words: its formula (ops.nn.keep_mask_from_seed) and
its Numba twin (kernels.dropout) against a sequential SplitMix64 written out in Python and against each
other (bit for bit), the mask's statistics (keep rate, neighbouring lanes, consecutive masks) and its
use of the engine's rng."""
import subprocess
import sys

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import dispatch, kernels
from tinygrad_lite.kernels import dropout as kd
from tinygrad_lite.random import rng
from tinygrad_lite.tensor import dropout_keep_mask

IMPLS = [dispatch.formula("keep_mask_from_seed"), kd.keep_mask_from_seed_numba]
MASK64 = (1 << 64) - 1


def splitmix64(state, n):
    """n outputs of SplitMix64 as its authors wrote it: a state stepped by the golden gamma, then mixed."""
    out = []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        out.append(z ^ (z >> 31))
    return out


def reference_mask(seed, count, bits, threshold):
    lanes = 64 // bits
    words = splitmix64(seed, -(-count // lanes))
    return np.array([(words[k // lanes] >> (bits * (k % lanes))) & ((1 << bits) - 1) >= threshold
                     for k in range(count)], dtype=bool)


def test_the_reference_is_splitmix64():
    assert splitmix64(0, 1) == [0xE220A8397B1DCDAF]  # the published first output from seed 0


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed", [0, 12345, MASK64])
@pytest.mark.parametrize("bits, threshold", [(16, 6554), (16, 0), (16, 65535), (32, 42949673), (32, 2 ** 32 - 1)])
def test_lanes_of_splitmix64_words_against_the_threshold(impl, seed, bits, threshold):
    for count in (0, 1, 3, 4, 5, 9, 4 * kd.BLOCK + 3):
        mask = impl(seed, count, bits, threshold)
        assert mask.dtype == np.bool_ and mask.shape == (count,)
        np.testing.assert_array_equal(mask, reference_mask(seed, count, bits, threshold))


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 1e-6, 0.01, 0.999999, 1 - 1e-12])
@pytest.mark.parametrize("shape", [(64, 4, 16, 16), (800, 128), (3, 7, 5), (1,), (0, 4)])
def test_numba_and_numpy_give_the_same_mask(p, shape):
    masks = []
    for backend in kernels.BACKENDS:
        with kernels.use_backend(backend):
            tl.manual_seed(11)
            masks.append(dropout_keep_mask(shape, p))
    assert masks[0].shape == shape and masks[0].dtype == np.bool_
    np.testing.assert_array_equal(masks[0], masks[1])


@pytest.mark.parametrize("p, bits", [(0.1, 16), (0.5, 16), (0.01, 32), (1e-6, 32)])
def test_the_mask_is_the_kernels_from_one_draw_of_the_engine_rng(p, bits):
    tl.manual_seed(12)
    mask = dropout_keep_mask((5, 77), p)
    after = rng().bit_generator.state
    tl.manual_seed(12)
    seed = rng().bit_generator.random_raw()
    assert rng().bit_generator.state == after
    threshold = round(p * 2 ** bits)
    np.testing.assert_array_equal(mask.ravel(), reference_mask(seed, mask.size, bits, threshold))


def masks(p, n, count=2, seed=0):
    tl.manual_seed(seed)
    return [dropout_keep_mask((n,), p) for _ in range(count)]


def within_6_sigma(hits, n, q):
    return abs(hits / n - q) < 6 * np.sqrt(q * (1 - q) / n)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.01])
def test_keep_rate_is_one_minus_p(p):
    n = 400_000
    mask, = masks(p, n, count=1)
    assert within_6_sigma(np.count_nonzero(mask), n, 1 - p)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.01])
def test_neighbouring_lanes_and_consecutive_masks_are_independent(p):
    """Two entries are kept together at the rate (1 - p)²: neighbours and near neighbours (lanes of
    one word, of the next word, the same lane a word apart), and the same entry of the next mask."""
    n = 400_000
    a, b = masks(p, n)
    for gap in (1, 2, 3, 4, 5, 8):
        both = a[:-gap] & a[gap:]
        assert within_6_sigma(np.count_nonzero(both), both.size, (1 - p) ** 2), gap
    assert within_6_sigma(np.count_nonzero(a & b), n, (1 - p) ** 2)


def test_consecutive_masks_differ_and_manual_seed_repeats_them():
    first = masks(0.5, 1000, count=3, seed=13)
    again = masks(0.5, 1000, count=3, seed=13)
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    assert not np.array_equal(first[0], masks(0.5, 1000, count=1, seed=14)[0])


def test_the_numpy_backend_never_imports_numba_for_a_mask():
    code = (
        "import sys\n"
        "import tinygrad_lite as tl\n"
        "from tinygrad_lite import kernels\n"
        "from tinygrad_lite.tensor import dropout_keep_mask\n"
        "assert 'numba' not in sys.modules\n"
        "kernels.set_backend('numpy')\n"
        "assert dropout_keep_mask((3, 5), 0.1).shape == (3, 5)\n"
        "assert 'numba' not in sys.modules, 'a mask on the numpy backend imported numba'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr


def test_numba_runs_the_registered_twin():
    with kernels.use_backend("numba"):
        assert dispatch.TWINS["keep_mask_from_seed"] is kd.keep_mask_from_seed_numba
