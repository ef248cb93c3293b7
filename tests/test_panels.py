"""kernels.panels: weights packed into 32-column panels, and the wide (16-float) micro-kernel product
against its NumPy twin and a float64 x·Wᵀ + b, on every remainder of rows (blocks of 8) and columns
(panels of 32). The kernel is correct on any x86 CPU (LLVM splits 16-float vectors where AVX-512 is
missing); only where it is used depends on `wide_vectors()`."""
import numpy as np
import pytest

from tinygrad_lite.kernels import panels


def operands(R, K, n, seed=0):
    rng = np.random.default_rng(seed)
    x, w, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((R, K), (n, K), (n,)))
    return x, w, b


def test_pack_panels_puts_each_weights_row_in_its_panels_column_and_zeros_after():
    w = np.arange(70 * 3, dtype=np.float32).reshape(70, 3)
    p = panels.pack_panels(w)
    assert p.shape == (3, 3, 32)
    for row in range(70):
        np.testing.assert_array_equal(p[row // 32, :, row % 32], w[row])
    assert not p[2, :, 70 - 64:].any()
    out = np.full((3, 3, 32), np.nan, np.float32)  # packing into a given array overwrites all of it
    assert panels.pack_panels(w, out) is out
    np.testing.assert_array_equal(out, p)


@pytest.mark.parametrize("R", [1, 2, 7, 8, 9, 64, 67])
@pytest.mark.parametrize("K, n", [(1, 1), (5, 31), (16, 32), (128, 33), (64, 100), (32, 1000)])
def test_the_kernel_matches_its_twin_and_float64(R, K, n):
    x, w, b = operands(R, K, n, seed=R * 1000 + K + n)
    p = panels.pack_panels(w)
    got = panels.panel_linear_numba(x, p, b)
    twin = panels.panel_linear_numpy(x, p, b)
    exact = x.astype(np.float64) @ w.T.astype(np.float64) + b
    assert got.shape == twin.shape == (R, n) and got.dtype == np.float32
    tolerance = 1e-6 * (np.abs(x).astype(np.float64) @ np.abs(w.T) + np.abs(b)) + 1e-7
    assert (np.abs(got - exact) <= 4 * tolerance).all()
    assert (np.abs(twin - exact) <= 4 * tolerance).all()


@pytest.mark.parametrize("R, K, n", [(0, 4, 5), (3, 0, 40), (0, 0, 1)])
def test_empty_products(R, K, n):
    x, w, b = operands(R, K, n)
    p = panels.pack_panels(w)
    for impl in (panels.panel_linear_numba, panels.panel_linear_numpy):
        got = impl(x, p, b)
        np.testing.assert_array_equal(got, np.broadcast_to(b, (R, n)))


def test_nan_and_inf_reach_only_their_rows_and_columns():
    x, w, b = operands(9, 8, 40)
    x[3, 2] = np.nan
    w[35, 1] = np.inf
    got = panels.panel_linear_numba(x, panels.pack_panels(w), b)
    with np.errstate(invalid="ignore"):
        expected = x @ w.T + b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-5, atol=1e-5)


def test_the_rows_stored_are_only_the_products_rows():
    """The last block repeats its last row in the registers; nothing past row R is written."""
    x, w, b = operands(5, 16, 40)
    big = np.full((8, 40), 7.0, np.float32)
    out = big[:5]
    panels._numba_kernels()(x, panels.pack_panels(w), b, out)
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5, atol=1e-5)
    assert (big[5:] == 7.0).all()


def test_wide_vectors_follows_the_cpu_numba_compiles_for(monkeypatch):
    import llvmlite.binding
    import numba
    panels.wide_vectors.cache_clear()
    try:
        monkeypatch.setattr(numba.config, "CPU_FEATURES", "+avx2,+fma,-avx512f")
        assert panels.wide_vectors() is False
        panels.wide_vectors.cache_clear()
        monkeypatch.setattr(numba.config, "CPU_FEATURES", "")
        host = llvmlite.binding.get_host_cpu_features().flatten().split(",")
        assert panels.wide_vectors() is ("+avx512f" in host)
    finally:
        panels.wide_vectors.cache_clear()
