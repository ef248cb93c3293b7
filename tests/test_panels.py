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


# ---------------------------------------------------------------- training products (trick panel_products)
def test_pack_columns_puts_each_column_in_its_panel_and_zeros_after():
    b = np.arange(3 * 70, dtype=np.float32).reshape(3, 70)
    p = panels.pack_columns(b)
    assert p.shape == (3, 3, 32)
    for col in range(70):
        np.testing.assert_array_equal(p[col // 32, :, col % 32], b[:, col])
    assert not p[2, :, 70 - 64:].any()
    np.testing.assert_array_equal(panels.pack_panels(b.T.copy()), p)  # a weight's panels are its transpose's columns


@pytest.mark.parametrize("M, K, n", [(1, 3, 1), (9, 1, 33), (32, 128, 32), (67, 40, 100), (130, 257, 65)])
@pytest.mark.parametrize("views", ["contiguous", "transposed"])
def test_panel_matmul_matches_its_twin_and_float64(M, K, n, views):
    """a · b as a Linear's backward passes them: a = gᵀ and b = Wᵀ are transposed views, not copies."""
    rng = np.random.default_rng(M * 7 + K + n)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, n)).astype(np.float32)
    if views == "transposed":
        a, b = np.asfortranarray(a), np.asfortranarray(b)
        assert not a.flags.c_contiguous or 1 in a.shape
    got, twin = panels.panel_matmul_numba(a, b), panels.panel_matmul_numpy(a, b)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = 4e-6 * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1e-7
    assert got.shape == (M, n) and got.dtype == np.float32
    assert (np.abs(got - exact) <= bound).all() and (np.abs(twin - exact) <= bound).all()


def the_rule(monkeypatch, wide=True, narrow=True, threads=1):
    monkeypatch.setattr(panels, "wide_vectors", lambda: wide)
    monkeypatch.setattr(panels, "narrow_blas", lambda: narrow)
    monkeypatch.setattr(panels, "get_num_threads", lambda: threads)


@pytest.mark.parametrize("wide, narrow, threads, expected", [
    (True, True, 1, True), (False, True, 1, False), (True, False, 1, False), (True, True, 2, False),
    (True, True, None, False)])
def test_panels_replace_blas_only_on_wide_cpus_with_narrow_blas_at_one_thread(monkeypatch, wide, narrow, threads,
                                                                              expected):
    from tinygrad_lite.kernels import use_backend
    the_rule(monkeypatch, wide, narrow, threads)
    a, b = np.ones((64, 16), np.float32), np.ones((16, 64), np.float32)
    with use_backend("numba"):
        assert panels.beats_blas(a, b) is expected
        assert not panels.beats_blas(a.astype(np.float64), b.astype(np.float64))   # float32 only
        assert not panels.beats_blas(a[:31], b) and not panels.beats_blas(a, b[:, :31])  # too small to pay
    with use_backend("numpy"):
        assert not panels.beats_blas(a, b)


def panels_forced_on(monkeypatch):
    """A Linear's float32 products on the panels whatever this CPU, its BLAS and the thread count are:
    panels.beats_blas answers as on an AVX-512 CPU whose OpenBLAS runs 8-float kernels, at one thread."""
    the_rule(monkeypatch)


@pytest.mark.parametrize("architecture, where, expected", [
    ("Haswell", "numpy", True), ("Zen", "numpy", True), ("SkylakeX", "numpy", False),
    ("Cooperlake", "numpy", False), ("Haswell", "elsewhere", False)])
def test_narrow_blas_reads_numpys_own_openblas(monkeypatch, architecture, where, expected):
    import os

    import threadpoolctl
    numpy_dir = os.path.dirname(np.__file__)
    path = numpy_dir + ".libs/libscipy_openblas.so" if where == "numpy" else "/opt/other/libopenblas.so"
    libs = [{"internal_api": "openmp", "filepath": "/x/libgomp.so"},
            {"internal_api": "openblas", "filepath": path, "architecture": architecture}]
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: libs)
    panels.narrow_blas.cache_clear()
    try:
        assert panels.narrow_blas() is expected
    finally:
        panels.narrow_blas.cache_clear()


def linear_step(op, dtype=np.float32):
    """Output and every gradient of one Linear-shaped op on 70 rows, 40 → 50 features."""
    import tinygrad_lite as tl
    from tinygrad_lite import Tensor, nn
    from tinygrad_lite.nn import functional as F
    from tinygrad_lite.nn import fused as fused_ops
    tl.manual_seed(0)
    rng = np.random.default_rng(3)
    lin = nn.Linear(40, 50, dtype=dtype)
    x = Tensor(rng.standard_normal((2, 35, 40)).astype(dtype), requires_grad=True)
    out = F.linear(x, lin.weight, lin.bias) if op == "linear" else fused_ops.linear_relu_dropout(
        x, lin.weight, lin.bias, p=0.0)
    (out * Tensor(rng.standard_normal(out.shape).astype(dtype))).sum().backward()
    return [out.data, x.grad, lin.weight.grad, lin.bias.grad]


@pytest.mark.parametrize("op", ["linear", "linear_relu_dropout"])
def test_a_linears_products_on_panels_match_blas_and_run_on_panels(monkeypatch, op):
    from trick_switches import both

    from tinygrad_lite.kernels import use_backend
    calls = []
    matmul = panels.panel_matmul_numba
    monkeypatch.setattr(panels, "panel_matmul_numba", lambda a, b: calls.append(a.shape + b.shape) or matmul(a, b))
    panels_forced_on(monkeypatch)
    with use_backend("numba"):
        on, off = both(lambda: linear_step(op), "panel_products")
    assert calls == [(70, 40, 40, 50), (70, 50, 50, 40), (50, 70, 70, 40)]  # x·Wᵀ, g·W, gᵀ·x; off: none
    exact = linear_step(op, np.float64)
    for a, b, e in zip(on, off, exact):
        scale = np.abs(e).max()
        np.testing.assert_allclose(a, e, rtol=0, atol=2e-5 * scale)
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-5 * scale)


@pytest.mark.parametrize("forced", [True, False])
def test_the_twin_of_linear_product_is_its_formula_to_rounding(monkeypatch, forced):
    """kernels.panels.linear_product_numba, the numba backend's nn.functional._product (op linear_product): the
    panels where the rule says so, else BLAS; either way the formula `a @ b` within float32 rounding."""
    from tinygrad_lite import dispatch, fast
    from tinygrad_lite.kernels import use_backend
    from tinygrad_lite.nn import functional as F
    calls = []
    matmul = panels.panel_matmul_numba
    monkeypatch.setattr(panels, "panel_matmul_numba", lambda a, b: calls.append(a.shape) or matmul(a, b))
    the_rule(monkeypatch, wide=forced)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((70, 40)).astype(np.float32), rng.standard_normal((40, 50)).astype(np.float32)
    with use_backend("numba"), fast.tricks_on("panel_products"):
        assert dispatch.TWINS["linear_product"] is panels.linear_product_numba
        got = F._product(a, b)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = 4e-6 * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1e-7
    assert got.dtype == np.float32 and (np.abs(got - exact) <= bound).all()
    assert (np.abs(F._product.formula(a, b) - exact) <= bound).all()
    assert calls == ([(70, 40)] if forced else [])


def test_the_formula_path_multiplies_on_blas_only(monkeypatch):
    """Under the numpy backend a Linear's products are the formula `a @ b`, whatever the rule would say."""
    from tinygrad_lite import fast
    from tinygrad_lite.kernels import use_backend
    monkeypatch.setattr(panels, "panel_matmul_numba", lambda a, b: pytest.fail("the panels ran"))
    panels_forced_on(monkeypatch)
    with use_backend("numpy"), fast.tricks_on("panel_products"):
        exact = linear_step("linear", np.float64)
        for got, want in zip(linear_step("linear"), exact):
            np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_a_linear_on_panels_matches_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    from tinygrad_lite import Tensor, nn
    from tinygrad_lite.kernels import use_backend
    rng = np.random.default_rng(4)
    x = rng.standard_normal((96, 48)).astype(np.float32)
    up = rng.standard_normal((96, 64)).astype(np.float32)
    lin = nn.Linear(48, 64)
    panels_forced_on(monkeypatch)
    with use_backend("numba"):
        xt = Tensor(x, requires_grad=True)
        (lin(xt) * Tensor(up)).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(lin.weight.data, requires_grad=True)
    tb = torch.tensor(lin.bias.data, requires_grad=True)
    (torch.nn.functional.linear(tx, tw, tb) * torch.from_numpy(up)).sum().backward()
    for ours, theirs in [(xt.grad, tx.grad), (lin.weight.grad, tw.grad), (lin.bias.grad, tb.grad)]:
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-4, atol=1e-4)
