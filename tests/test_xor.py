"""Tests for examples/xor.py: the article's three claims about XOR hold in our engine."""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from example_scripts import load_example

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "xor.py"


xor = load_example("xor")
LN2 = math.log(2)


@pytest.mark.parametrize("act", ["tanh", "relu", "sigmoid"])
def test_mlp_with_activation_solves_xor(act):
    result = xor.train_mlp(act, seed=0)
    assert result.correct == 4
    assert result.loss < 0.01
    assert [s > 0 for s in result.logits] == [False, True, True, False]


@pytest.mark.parametrize("seed", range(6))
def test_single_layer_perceptron_cannot_fit_xor(seed):
    result = xor.train_perceptron(seed)
    assert result.correct <= 3
    assert result.loss >= LN2 - 1e-9  # ln 2 is the best any linear logit can do on XOR


@pytest.mark.parametrize("seed", range(3))
def test_linear_stack_equals_its_product_matrix_and_fails(seed):
    result = xor.train_linear_stack(seed)
    collapsed = np.array(xor.XOR_INPUTS) @ result.W.T + result.b
    assert collapsed[:, 0] == pytest.approx(result.logits, abs=1e-12)
    assert result.max_difference < 1e-12
    assert result.correct <= 3
    assert result.loss >= LN2 - 1e-9


def test_untrained_linear_stack_is_one_linear_map_everywhere():
    engine = xor.ValueEngine()
    model = engine.linear_stack(hidden=3, seed=5)
    (W1, b1), (W2, b2) = engine.linear_maps(model)
    assert W1.shape == (3, 2) and W2.shape == (1, 3)
    points = np.random.default_rng(0).normal(size=(10, 2))
    outputs = [model(list(point)).data for point in points]
    assert outputs == pytest.approx(points @ (W2 @ W1).T[:, 0] + (W2 @ b1 + b2)[0], abs=1e-12)


def test_unknown_engine_is_a_clear_system_exit():
    with pytest.raises(SystemExit, match="--engine bogus: not available yet"):
        xor.engine_named("bogus")


def run_script(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                                     os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, str(SCRIPT), *args], check=False, capture_output=True,
                          text=True, env=env, timeout=60)


def test_script_prints_the_three_results():
    run = run_script("--act", "tanh", "--seed", "0")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    rows = {name: next(line for line in lines if line.startswith(name))
            for name in ("1. single-layer perceptron", "2. two linear layers",
                         "3. 2-layer MLP, tanh")}
    assert rows["3. 2-layer MLP, tanh"].split()[-2] == "4/4"
    for name in ("1. single-layer perceptron", "2. two linear layers"):
        assert rows[name].split()[-2] in {"0/4", "1/4", "2/4", "3/4"}
    assert "not linearly separable" in run.stdout


def test_script_tensor_engine_solves_xor():
    run = run_script("--engine", "tensor")
    assert run.returncode == 0, run.stderr
    assert "engine=tensor" in run.stdout and "4/4" in run.stdout


@pytest.mark.parametrize("act", ["tanh", "relu", "sigmoid"])
def test_tensor_engine_makes_the_same_three_points(act):
    assert xor.train_mlp(act, seed=0, engine="tensor").correct == 4
    assert xor.train_mlp(act, seed=0, engine="tensor").loss < 0.01
    for seed in range(3):
        assert xor.train_perceptron(seed, engine="tensor").correct <= 3
        stack = xor.train_linear_stack(seed, engine="tensor")
        assert stack.correct <= 3 and stack.max_difference < 1e-9


def test_value_and_tensor_engines_agree_on_the_same_weights():
    """The bridge between the floors: the same 2-4-1 tanh MLP, weights copied from the
    scalar model into the tensor model, gives the same logits and the same gradients."""
    values, tensors = xor.ValueEngine(), xor.TensorEngine()
    v_model, t_model = values.mlp(4, "tanh", seed=3), tensors.mlp(4, "tanh", seed=0)
    linears = [m for m in t_model if isinstance(m, tensors.nn.Linear)]
    for layer, (W, b) in zip(linears, values.linear_maps(v_model)):
        layer.weight.data[...] = W
        layer.bias.data[...] = b
    np.testing.assert_allclose(tensors.logits(t_model), values.logits(v_model), atol=1e-12)
    v_loss = values._loss(v_model)
    v_loss.backward()
    t_loss = tensors.bce(t_model(tensors.x), tensors.y)
    t_loss.backward()
    assert abs(v_loss.data - t_loss.item()) < 1e-12
    v_first = v_model.layers[0]
    np.testing.assert_allclose(linears[0].weight.grad, [[w.grad for w in n.w] for n in v_first.neurons], atol=1e-12)
