"""tinygrad_lite.checks: one check per kind of argument, so a mistake gets the same words wherever
it is made, and every public boundary of the engine (and viz) uses them."""
import math

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import checks, nn, optim
from tinygrad_lite.threads import ENV_VAR, default_num_threads
from viz import plots


def test_int_checks_accept_python_and_numpy_ints_never_bools():
    assert checks.positive_int("op", "n", np.int64(3)) == 3 and type(checks.positive_int("op", "n", 3)) is int
    assert checks.int_at_least("op", "seed", 0, 0) == 0
    for bad in (0, -1, 2.0, True, "3", None):
        with pytest.raises(ValueError, match=f"op: n must be a positive int, got {bad!r}"):
            checks.positive_int("op", "n", bad)
    with pytest.raises(ValueError, match="op: resolution must be an int >= 2, got 1"):
        checks.int_at_least("op", "resolution", 1, 2)


@pytest.mark.parametrize("kwargs, bad, words", [
    ({"low": 0.0}, -0.1, "finite and >= 0"),
    ({"low": 0.0, "low_open": True}, 0, "finite and > 0"),
    ({"low": 0.0, "high": 1.0, "high_open": True}, 1.0, "finite and in [0, 1)"),
    ({"low": 0.0, "high": 10.0, "low_open": True, "high_open": True}, math.inf, "finite and in (0, 10)"),
    ({}, math.nan, "a finite number"),
    ({"low": 0.0, "allow_inf": True}, -1, ">= 0"),
])
def test_number_says_what_it_expected(kwargs, bad, words):
    with pytest.raises(ValueError) as info:
        checks.number("op", "x", bad, **kwargs)
    assert str(info.value) == f"op: x must be {words}, got {float(bad)!r}"


def test_number_returns_a_float_and_rejects_non_numbers_with_a_type_error():
    assert checks.number("op", "x", np.float32(0.5), 0.0) == 0.5
    assert checks.number("op", "x", math.inf, 0.0, allow_inf=True) == math.inf
    for bad in ("1", True, None, [1.0]):
        with pytest.raises(TypeError, match="op: x must be a number, got"):
            checks.number("op", "x", bad)


def test_probability_and_one_of():
    assert checks.probability("op", "p", 1) == 1.0
    for bad in (1.5, -0.1, math.nan, "0.5", True):
        with pytest.raises(ValueError, match=r"op: p must be in \[0, 1\], got"):
            checks.probability("op", "p", bad)
    with pytest.raises(ValueError, match=r"op: p must be in \[0, 1\), got 1"):
        checks.probability("op", "p", 1, allow_one=False)
    assert checks.one_of("op", "mode", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"op: mode must be one of \['a', 'b'\], got 'c'"):
        checks.one_of("op", "mode", "c", ("a", "b"))


@pytest.mark.parametrize("make, message", [
    (lambda: tl.set_num_threads(0), "set_num_threads: n must be a positive int, got 0"),
    (lambda: tl.manual_seed(-1), "manual_seed: seed must be an int >= 0, got -1"),
    (lambda: tl.manual_seed(1.5), "manual_seed: seed must be an int >= 0, got 1.5"),
    (lambda: nn.LayerNorm((4, 0)), "LayerNorm: normalized_shape must be a positive int, got 0"),
    (lambda: nn.LayerNorm(4, eps=0), "LayerNorm: eps must be finite and > 0, got 0.0"),
    (lambda: nn.Embedding(5, 2, padding_idx=5), r"Embedding: padding_idx 5 is out of range .* \[-5, 5\)"),
    (lambda: nn.Embedding(5, 2, padding_idx=1.0), "Embedding: padding_idx 1.0 is out of range"),
    (lambda: nn.GELU("fast"), r"GELU: approximate must be one of \['none', 'tanh'\], got 'fast'"),
    (lambda: nn.MLP([2, 3, 1], dropout=-0.1), r"MLP: dropout must be in \[0, 1\], got -0.1"),
    (lambda: nn.init.kaiming_uniform_(nn.Parameter(np.zeros((2, 2), np.float32)), nonlinearity="elu"),
     "kaiming_uniform_: nonlinearity must be one of .*'linear'.*, got 'elu'"),
    (lambda: optim.clip_grad_norm_([], 1.0, norm_type=0), "clip_grad_norm_: norm_type must be > 0, got 0.0"),
    (lambda: optim.SGD([nn.Parameter(np.zeros(1))], lr=0.1, momentum=-1),
     "SGD: momentum must be finite and >= 0, got -1.0"),
    (lambda: optim.Adam([nn.Parameter(np.zeros(1))], betas=(1.0, 0.9)),
     r"Adam: beta1 must be finite and in \[0, 1\), got 1.0"),
    (lambda: nn.functional.cross_entropy(tl.Tensor(np.zeros((2, 3))), np.array([0, 1]), label_smoothing=2),
     r"cross_entropy: label_smoothing must be in \[0, 1\], got 2"),
    (lambda: nn.functional.mse_loss(tl.Tensor(np.zeros(2)), np.zeros(2), reduction="avg"),
     r"mse_loss: reduction must be one of \['mean', 'sum', 'none'\], got 'avg'"),
    (lambda: plots.plot_softmax_temperatures(dpi=0), r"plot_softmax_temperatures: dpi must be finite and in \(0, "),
    (lambda: plots.plot_descent_path(lambda x: x * x, [1.0, 0.5], resolution=1),
     "plot_descent_path: resolution must be an int >= 2, got 1"),
])
def test_public_boundaries_word_the_same_mistake_the_same_way(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_fused_attention_checks_heads_once_before_splitting():
    q = tl.Tensor(np.zeros((1, 2, 4)))
    with pytest.raises(ValueError, match="fused_attention: heads must be a positive int, got 0"):
        nn.fused.fused_attention(q, q, q, heads=0)


@pytest.mark.parametrize("text, expected", [("3", 3), (" 2 ", 2), ("", 1)])
def test_thread_count_from_the_environment(monkeypatch, text, expected):
    monkeypatch.setenv(ENV_VAR, text)
    assert default_num_threads(1) == expected


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5"])
def test_a_bad_thread_count_in_the_environment_is_named(monkeypatch, text):
    monkeypatch.setenv(ENV_VAR, text)
    with pytest.raises(ValueError, match=f"environment: {ENV_VAR} must be a positive int, got"):
        default_num_threads(1)


@pytest.mark.parametrize("make", [lambda d: nn.Linear(2, 3, dtype=d), lambda d: nn.Embedding(4, 3, dtype=d),
                                  lambda d: nn.LayerNorm(3, dtype=d)])
def test_layers_take_none_as_the_default_float32_and_keep_float64(make):
    assert all(p.data.dtype == np.float32 for p in make(None).parameters())
    assert all(p.data.dtype == np.float64 for p in make(np.float64).parameters())
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        make(np.int64)
