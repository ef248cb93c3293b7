"""kernels.mkl: a Linear's products on Intel's oneMKL (trick mkl_products), against the formula `a @ b` in
float64, in every layout a Linear's three products pass (x·Wᵀ, g·W, gᵀ·x); where it declines; and that it is
reproducible bit for bit wherever the operands lie in memory. The products run where the `mkl` wheel is
installed (the extras mkl and bench; CI installs it), and those tests skip elsewhere; the rule `serves` is
tested everywhere."""
import numpy as np
import pytest
from test_panels import linear_step  # a Linear's output and gradients, 70 rows, 40 -> 50

from tinygrad_lite import dispatch, fast
from tinygrad_lite.kernels import mkl, panels, use_backend

needs_mkl = pytest.mark.skipif(not mkl.available(), reason="the mkl wheel is not installed (pip install .[mkl])")


@pytest.fixture
def one_thread(monkeypatch):
    as_measured(monkeypatch)


def as_measured(monkeypatch):
    """What serves() asks of the machine answered as on the Intel CPU at one thread where oneMKL was measured, the
    wheel installed (so the rule's own tests mean something without it too)."""
    monkeypatch.setattr(mkl, "get_num_threads", lambda: 1)
    monkeypatch.setattr(mkl, "intel_cpu", lambda: True)
    monkeypatch.setattr(mkl, "available", lambda: True)


def operands(M, K, n, dtype, layout, seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, n)).astype(dtype)
    if layout in ("a transposed", "both transposed"):
        a = np.ascontiguousarray(a.T).T  # gᵀ as a Linear's backward passes it: a view, not a copy
    if layout in ("b transposed", "both transposed"):
        b = np.ascontiguousarray(b.T).T  # Wᵀ
    return a, b


@needs_mkl
@pytest.mark.parametrize("M, K, n", [(1, 1, 1), (1, 7, 5), (9, 1, 33), (70, 40, 50), (257, 130, 65), (3, 600, 2)])
@pytest.mark.parametrize("layout", ["contiguous", "a transposed", "b transposed", "both transposed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_product_is_the_formula_to_rounding(one_thread, M, K, n, layout, dtype):
    a, b = operands(M, K, n, dtype, layout, seed=M + K * 3 + n * 7)
    assert mkl.serves(a, b)
    got = mkl.product(a, b)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    eps = np.finfo(dtype).eps
    bound = 4 * K * eps * (np.abs(a).astype(np.float64) @ np.abs(b)) + np.finfo(dtype).tiny
    assert got.shape == (M, n) and got.dtype == dtype and got.flags.c_contiguous
    assert (np.abs(got - exact) <= bound).all()
    assert (np.abs(mkl.reference_product(a, b) - exact) <= bound).all()


@needs_mkl
def test_the_same_operands_give_the_same_bits_wherever_they_lie(one_thread):
    """Conditional numerical reproducibility (MKL_CBWR_STRICT): a resumed run's arrays sit at other addresses."""
    rng = np.random.default_rng(1)
    a0, b0 = rng.standard_normal((257, 130)).astype(np.float32), rng.standard_normal((130, 300)).astype(np.float32)
    first = mkl.product(a0, b0)
    for offset in range(1, 16):
        a = np.empty(a0.size + 16, np.float32)[offset:offset + a0.size].reshape(a0.shape)
        b = np.empty(b0.size + 16, np.float32)[16 - offset:16 - offset + b0.size].reshape(b0.shape)
        a[...], b[...] = a0, b0
        np.testing.assert_array_equal(mkl.product(a, b), first)


@pytest.mark.parametrize("case", ["strided", "3-D", "mixed dtypes", "integers", "float16", "no rows", "no columns",
                                  "empty sum"])
def test_it_declines_what_gemm_cannot_take_as_it_is(one_thread, case):
    a, b = np.ones((6, 4), np.float32), np.ones((4, 5), np.float32)
    a, b = {"strided": (a[::2], b[:, ::2][:3]), "3-D": (a[None], b), "mixed dtypes": (a, b.astype(np.float64)),
            "integers": (a.astype(np.int64), b.astype(np.int64)),
            "float16": (a.astype(np.float16), b.astype(np.float16)), "no rows": (a[:0], b),
            "no columns": (a, b[:, :0]), "empty sum": (a[:, :0], b[:0])}[case]
    assert not mkl.serves(a, b)


def test_it_serves_a_linears_operands(one_thread):
    w, x, g = np.ones((5, 4), np.float32), np.ones((6, 4), np.float32), np.ones((6, 5), np.float32)
    assert mkl.serves(x, w.T) and mkl.serves(g, w) and mkl.serves(g.T, x)


@pytest.mark.parametrize("threads", [2, None])
def test_it_declines_unless_the_engine_runs_one_thread(monkeypatch, one_thread, threads):
    monkeypatch.setattr(mkl, "get_num_threads", lambda: threads)
    assert not mkl.serves(np.ones((6, 4), np.float32), np.ones((4, 5), np.float32))


def test_it_declines_without_the_library(monkeypatch, one_thread):
    monkeypatch.setattr(mkl, "available", lambda: False)
    assert not mkl.serves(np.ones((6, 4), np.float32), np.ones((4, 5), np.float32))


def test_it_declines_on_a_cpu_not_intels(monkeypatch, one_thread):
    monkeypatch.setattr(mkl, "intel_cpu", lambda: False)
    assert not mkl.serves(np.ones((6, 4), np.float32), np.ones((4, 5), np.float32))


@pytest.mark.parametrize("vendor, expected", [("GenuineIntel", True), ("AuthenticAMD", False)])
def test_the_vendor_is_read_from_cpuinfo(tmp_path, vendor, expected):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 6\n", encoding="utf-8")
    assert mkl.intel_cpu.__wrapped__(str(cpuinfo)) is expected


def test_without_the_wheel_there_is_no_library(monkeypatch):
    import importlib.metadata

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    assert mkl.library_path() is None


@needs_mkl
@pytest.mark.parametrize("on", [True, False])
def test_a_linears_three_products_run_on_mkl_with_the_trick_and_match_the_formula(monkeypatch, one_thread, on):
    calls = []
    product = mkl.product
    monkeypatch.setattr(mkl, "product", lambda a, b: calls.append(a.shape + b.shape) or product(a, b))
    monkeypatch.setattr(panels, "beats_blas", lambda a, b: False)
    monkeypatch.setitem(dispatch.TWINS, "linear", dispatch.formula("linear"))  # its products as the formula makes
    switch = fast.tricks_on if on else fast.tricks_off                         # them (its twin: the test below)
    with use_backend("numba"), switch("mkl_products"):
        got = linear_step("linear")
    assert calls == ([(70, 40, 40, 50), (70, 50, 50, 40), (50, 70, 70, 40)] if on else [])  # x·Wᵀ, g·W, gᵀ·x
    for g, exact in zip(got, linear_step("linear", np.float64)):
        np.testing.assert_allclose(g, exact, rtol=0, atol=2e-5 * np.abs(exact).max())


@needs_mkl
def test_a_linear_s_twin_multiplies_on_mkl_with_the_trick_and_gives_the_formula_s_bits(monkeypatch, one_thread):
    """kernels.linear_layer calls oneMKL's ?gemm itself, one call each way, where the formula's products would
    run on oneMKL: the same library, the same bits."""
    from tinygrad_lite.kernels import linear_layer
    monkeypatch.setattr(panels, "beats_blas", lambda a, b: False)
    rng = np.random.default_rng(3)
    x, w, b, g = (rng.standard_normal(shape).astype(np.float32) for shape in ((70, 40), (50, 40), (50,), (70, 50)))
    needs, out, address = (True, True, True), np.empty((70, 50), np.float32), mkl.gemm_addresses()[np.dtype(np.float32)]
    with use_backend("numba"):
        with fast.tricks_on("mkl_products"):
            assert linear_layer._engine(x, w, out) == (address, False)
            y, backward = linear_layer.linear_op_numba(x, w, b, needs)
            got = (y, *backward(g))
            y, backward = dispatch.formula("linear")(x, w, b, needs)
            expected = (y, *backward(g))
        with fast.tricks_off("mkl_products"):
            assert linear_layer._engine(x, w, out)[0] != address
    for a, e in zip(got, expected):
        assert np.array_equal(a, e)


def test_the_formula_path_never_calls_mkl(monkeypatch):
    expected = linear_step("linear", np.float64)
    as_measured(monkeypatch)
    monkeypatch.setattr(mkl, "product", lambda a, b: pytest.fail("oneMKL ran on the formula path"))
    with fast.plain():
        got = linear_step("linear")
    for g, exact in zip(got, expected):
        np.testing.assert_allclose(g, exact, rtol=0, atol=2e-5 * np.abs(exact).max())
