"""Anomaly mode: NaN/Inf deep inside a model, in forward or only in backward, is reported
naming the op, the module path and the line of model code that created the op; without
anomaly mode nothing is checked."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, autograd, nn
from tinygrad_lite.nn import functional as F
from transformer import Transformer

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]


def line_of(tag: str) -> str:
    """'path:line' of the line in this file that ends with the comment `# site: tag`."""
    for number, text in enumerate(HERE.read_text(encoding="utf-8").splitlines(), start=1):
        if text.rstrip().endswith(f"# site: {tag}"):
            return f"{HERE}:{number}"
    raise LookupError(tag)


# ---------------------------------------------------------------- a small model with a bad sublayer
class LogOfZero(nn.Module):
    def forward(self, x):
        return (x - x).log()  # site: log


class SqrtOfNegative(nn.Module):
    def forward(self, x):
        return (-(x * x) - 1.0).sqrt()  # site: sqrt


class ZeroOverZero(nn.Module):
    def forward(self, x):
        zero = x * 0.0
        return zero / zero  # site: div


class Block(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.feed_forward = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), sublayer)

    def forward(self, x):
        return self.feed_forward(self.proj(x))  # site: block


class Net(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.layers = nn.ModuleList([Block(nn.Tanh()), Block(sublayer)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.sum()


def batch():
    return Tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))


@pytest.mark.parametrize("sublayer, op, bad", [
    (LogOfZero, "log", "Inf"),
    (SqrtOfNegative, "sqrt", "NaN"),
    (ZeroOverZero, "div", "NaN"),
])
def test_forward_anomaly_names_op_module_path_and_line(sublayer, op, bad):
    tl.manual_seed(0)
    model = Net(sublayer())
    with tl.detect_anomaly(), pytest.raises(tl.AnomalyError) as info:
        model(batch())
    message = str(info.value)
    assert f"the output of op '{op}' contains {bad}" in message
    assert f"module 'layers.1.feed_forward.2' ({sublayer.__name__})" in message
    assert f"created at {line_of(op)}" in message
    assert "\n" not in message
    assert isinstance(info.value, FloatingPointError)


def test_without_anomaly_mode_nothing_is_checked(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("anomaly checks ran outside anomaly mode")
    monkeypatch.setattr(autograd, "check_finite", forbidden)
    monkeypatch.setattr(autograd, "creation_site", forbidden)
    tl.manual_seed(0)
    model = Net(LogOfZero())
    with np.errstate(all="ignore"):
        loss = model(batch())
        assert np.isneginf(loss.item())
        loss.backward()
    assert loss._site is None
    assert any(not np.isfinite(p.grad).all() for p in model.parameters())


def test_anomaly_mode_can_be_switched_off_inside_and_is_restored():
    model = Net(LogOfZero())
    with tl.detect_anomaly():
        with tl.detect_anomaly(enabled=False), np.errstate(all="ignore"):
            assert not np.isfinite(model(batch()).item())
        assert autograd.is_anomaly_enabled()
        with pytest.raises(tl.AnomalyError):
            model(batch())
    assert not autograd.is_anomaly_enabled()


# ---------------------------------------------------------------- NaN/Inf that only backward makes
class SqrtAtZero(nn.Module):
    def forward(self, x):
        return x.sqrt()  # site: sqrt-at-zero


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
        self.root = SqrtAtZero()

    def forward(self, x):
        return (self.root(self.encoder(x)) * 2.0).sum()


def relu_zeros_everywhere():
    """A model whose ReLU outputs exact zeros, so sqrt's forward is fine (√0 = 0) but its
    backward is 1/(2·√0) = Inf."""
    model = Model()
    model.encoder[0].weight.data[:] = 0
    model.encoder[0].bias.data[:] = np.array([-1.0, 0.0, 2.0], np.float32)
    return model


def test_backward_only_inf_is_caught_and_names_the_op_whose_backward_made_it():
    model = relu_zeros_everywhere()
    with tl.detect_anomaly():
        loss = model(Tensor(np.ones((2, 3), np.float32)))
        assert np.isfinite(loss.item())
        with pytest.raises(tl.AnomalyError) as info:
            loss.backward()
    message = str(info.value)
    assert "the backward of op 'sqrt' gave a gradient for input 0 that contains Inf" in message
    assert "module 'root' (SqrtAtZero)" in message
    assert f"created at {line_of('sqrt-at-zero')}" in message


def test_backward_nan_from_zero_times_inf_is_named():
    x = Tensor(np.array([0.0, 4.0]), requires_grad=True)
    with tl.detect_anomaly():
        y = (x.sqrt() * 0.0).sum()  # site: zero-times-sqrt
        with pytest.raises(tl.AnomalyError) as info:
            y.backward()
    message = str(info.value)
    assert "the backward of op 'sqrt'" in message and "contains NaN" in message
    assert "outside any module" in message
    assert f"created at {line_of('zero-times-sqrt')}" in message


def test_backward_checked_even_if_forward_ran_without_anomaly_mode():
    model = relu_zeros_everywhere()
    loss = model(Tensor(np.ones((2, 3), np.float32)))
    with tl.detect_anomaly(), pytest.raises(tl.AnomalyError, match="backward of op 'sqrt'.*created at <unknown>"):
        loss.backward()


# ---------------------------------------------------------------- fused ops and the Transformer
def test_fused_functional_ops_are_checked_and_the_site_is_the_calling_model_line():
    model = Net(nn.Tanh())
    model.layers[0].proj.weight.data[1, 2] = np.inf
    with tl.detect_anomaly(), pytest.raises(tl.AnomalyError) as info:
        model(batch())
    message = str(info.value)
    assert "op 'linear'" in message and "module 'layers.0.proj' (Linear)" in message
    assert f"created at {line_of('block')}" in message

    logits = Tensor(np.array([[0.0, np.inf]], np.float32), requires_grad=True)
    with tl.detect_anomaly(), pytest.raises(tl.AnomalyError, match="op 'cross_entropy' contains NaN"):
        F.cross_entropy(logits, np.array([0]))


def tiny_transformer():
    tl.manual_seed(0)
    return Transformer(11, 13, d_model=16, h=2, N=1, d_ff=32, dropout=0.0)


SRC = np.array([[4, 5, 6, 7], [8, 9, 0, 0]])
TGT = np.array([[2, 4, 5, 3], [2, 6, 3, 0]])


def loss_of(model):
    logits = model(SRC, TGT[:, :-1])
    return F.cross_entropy(logits.reshape(-1, 13), TGT[:, 1:].reshape(-1), ignore_index=0)


def poison(kind):
    def log_of_zero(y):
        return (y - y).log()  # site: transformer-log

    def sqrt_of_negative(y):
        return (-(y * y) - 1.0).sqrt()  # site: transformer-sqrt

    def zero_over_zero(y):
        return (y * 0.0) / (y * 0.0)  # site: transformer-div
    return {"log": log_of_zero, "sqrt": sqrt_of_negative, "div": zero_over_zero}[kind]


@pytest.mark.parametrize("path, op, bad", [
    ("encoder.layers.0.feed_forward", "log", "Inf"),
    ("decoder.layers.0.self_attn", "sqrt", "NaN"),
    ("decoder.layers.0.cross_attn", "div", "NaN"),
])
def test_transformer_sublayer_anomaly_names_the_paper_path(path, op, bad):
    model = tiny_transformer()
    sublayer = model.get_submodule(path) if hasattr(model, "get_submodule") else \
        dict(model.named_modules())[path]
    original = sublayer.forward
    bad_op = poison(op)
    sublayer.forward = lambda *args, **kwargs: bad_op(original(*args, **kwargs))
    with tl.detect_anomaly(), pytest.raises(tl.AnomalyError) as info:
        loss_of(model)
    message = str(info.value)
    assert f"the output of op '{op}' contains {bad}" in message
    assert f"module '{path}' ({type(sublayer).__name__})" in message
    assert f"created at {line_of('transformer-' + op)}" in message


def test_a_poisoned_weight_is_traced_to_the_model_source_line():
    model = tiny_transformer()
    model.encoder.layers[0].feed_forward.w_1.weight.data[0, 0] = np.nan
    with tl.detect_anomaly(), pytest.raises(tl.AnomalyError) as info:
        loss_of(model)
    message = str(info.value)
    assert "op 'linear' contains NaN" in message
    assert "module 'encoder.layers.0.feed_forward.w_1' (Linear)" in message
    file, line = re.search(r"created at (.+):(\d+)\)$", message).groups()
    assert Path(file) == ROOT / "transformer" / "feed_forward.py"
    assert "self.w_1(x)" in Path(file).read_text(encoding="utf-8").splitlines()[int(line) - 1]


def test_a_healthy_transformer_with_a_padding_only_row_passes_anomaly_mode():
    model = tiny_transformer()
    src = np.array([[4, 5, 6, 7], [0, 0, 0, 0]])
    tgt = np.array([[2, 4, 5, 3], [0, 0, 0, 0]])
    with tl.detect_anomaly():
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 13), tgt[:, 1:].reshape(-1), ignore_index=0,
                               label_smoothing=0.1)
        loss.backward()
    assert np.isfinite(loss.item())


# ---------------------------------------------------------------- the environment variable
SCRIPT = textwrap.dedent("""
    import numpy as np
    from tinygrad_lite import Tensor
    x = Tensor(np.zeros(3, np.float32), requires_grad=True)
    with np.errstate(all="ignore"):
        y = x.log()
    print("finished", float(y.data[0]))
""")


@pytest.mark.parametrize("value, raises", [("1", True), ("0", False), ("", False)])
def test_the_environment_variable_switches_anomaly_mode_on(value, raises):
    env = {**os.environ, "TINYGRAD_LITE_DETECT_ANOMALY": value,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=False, capture_output=True, text=True,
                         timeout=120)
    if raises:
        assert run.returncode != 0
        assert "AnomalyError: anomaly: the output of op 'log' contains Inf" in run.stderr
        assert "outside any module, created at <string>:6" in run.stderr
    else:
        assert run.returncode == 0, run.stderr
        assert "finished -inf" in run.stdout
