"""tinylearn's machinery: the engine's hook (dispatch.substitute), the working folder (exercise files,
progress written atomically, hints one at a time, reset), the Python API, and the command line as a new
learner uses it (list, start 6, a softmax without the max shift, check 6, a fixed one, check 6, list)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tinylearn
from tinygrad_lite import Tensor
from tinygrad_lite.dispatch import OPS, formula, substitute
from tinygrad_lite.fast import plain
from tinygrad_lite.nn import functional
from tinylearn import workfolder
from tinylearn.exercises.scalar_runs import reference_order
from tinylearn.pictures import cross_entropy_with_value, swapped

NO_SHIFT = '''    z = x * scale
    if mask is not None:
        z = z + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
'''
FIXED = '''    z = x * scale
    if mask is not None:
        z = z + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    top = z.max(axis=-1, keepdims=True) if z.size else z
    e = np.exp(z - np.where(np.isneginf(top), 0.0, top))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
'''


def written(path, body):
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("    raise NotImplementedError\n", body), encoding="utf-8")


# ---------------------------------------------------------------- the engine's hook
def test_substitute_runs_the_given_function_as_the_ops_formula_then_restores_it():
    calls = []

    def mine(x, scale=1.0, mask=None):
        calls.append(x.shape)
        return formula("softmax_forward")(x, scale, mask)

    x = np.array([[1.0, 2.0, 3.0]])
    with plain():
        with substitute("softmax_forward", mine):
            inside = Tensor(x).softmax(-1).data
        Tensor(x).softmax(-1)
    assert calls == [(1, 3)]
    assert np.allclose(inside, np.exp(x) / np.exp(x).sum())
    assert OPS["softmax_forward"].__globals__["plain"] is formula("softmax_forward")


def test_substitute_restores_the_formula_after_an_error():
    def broken(x, scale=1.0, mask=None):
        raise ArithmeticError("mine")

    with plain(), pytest.raises(ArithmeticError, match="mine"), substitute("softmax_forward", broken):
        Tensor(np.ones((1, 2))).softmax(-1)
    assert OPS["softmax_forward"].__globals__["plain"] is formula("softmax_forward")


def test_substitute_names_an_unknown_op_and_a_non_function():
    with pytest.raises(KeyError, match="no op named 'softmax'.*softmax_forward"), substitute("softmax", abs):
        pass
    with pytest.raises(TypeError, match="expected a function for op 'softmax_forward', got int"):
        with substitute("softmax_forward", 3):
            pass


# ---------------------------------------------------------------- the API and the working folder
def test_every_command_takes_the_number_or_the_name_and_an_unknown_one_is_one_line():
    assert tinylearn.find(6) is tinylearn.find("6") is tinylearn.find("softmax") is tinylearn.find("06")
    with pytest.raises(LookupError, match="did you mean softmax"):
        tinylearn.find("sofmax")
    with pytest.raises(LookupError, match=r"give a number 1-\d+ or a name"):
        tinylearn.find(99)


def test_start_writes_the_stub_into_the_folder_and_check_records_progress(tmp_path):
    assert "wrote" in tinylearn.start("softmax", tmp_path)
    path = tmp_path / "06_softmax.py"
    text = path.read_text(encoding="utf-8")
    assert "def softmax_forward(x, scale=1.0, mask=None):" in text and "raise NotImplementedError" in text
    assert "already there" in tinylearn.start(6, tmp_path)
    assert not tinylearn.check(6, folder=tmp_path)
    written(path, NO_SHIFT)
    report = tinylearn.check(6, folder=tmp_path)
    assert report.mistake_names == ["no max shift"]
    assert json.loads((tmp_path / workfolder.PROGRESS).read_text())["softmax"]["status"] == "failed"
    written(path, "")
    path.write_text(path.read_text().replace(NO_SHIFT, FIXED))
    assert tinylearn.check("softmax", folder=tmp_path)
    assert "✓  6  softmax" in tinylearn.listing(tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_start_never_writes_into_an_installed_package():
    for package in workfolder.PACKAGES:
        with pytest.raises(ValueError, match="inside the package .*run tinylearn from a folder of your own"):
            tinylearn.start(6, package / "ops" if package.name == "tinygrad_lite" else package)
    assert not [p for package in workfolder.PACKAGES for p in package.rglob("06_softmax.py")]


def test_hints_come_one_more_each_time_and_stop_at_the_last(tmp_path):
    exercise = tinylearn.find(6)
    said = [tinylearn.hint(6, tmp_path) for _ in range(len(exercise.hints) + 1)]
    assert said[0].startswith("Hint 2 of") and exercise.hints[1] in said[0]
    assert exercise.hints[-1] in said[-1] and said[-1] == said[-2] and "the last one" in said[-1]


def test_reset_keeps_the_learners_version_and_forgets_the_progress(tmp_path):
    tinylearn.start(6, tmp_path)
    path = tmp_path / "06_softmax.py"
    written(path, FIXED)
    assert tinylearn.check(6, folder=tmp_path)
    tinylearn.reset("softmax", tmp_path)
    assert "raise NotImplementedError" in path.read_text() and FIXED in (tmp_path / "06_softmax.py.bak").read_text()
    assert json.loads((tmp_path / workfolder.PROGRESS).read_text())["softmax"] == {"status": "started", "hints": 0}


def test_check_from_python_takes_a_function_and_says_what_it_got():
    report = tinylearn.check("softmax", formula("softmax_forward"))
    assert report and "python -m tinylearn draw 6" in repr(report)
    with pytest.raises(TypeError, match="expected your softmax_forward function, got str"):
        tinylearn.check("softmax", "softmax")


DRAWN = {"mul": ">*", "tanh": ">tanh", "softmax": ">softmax (masked)", "softmax_backward": ">softmax (masked)",
         "layernorm_backward": ">layer_norm", "attention": ">softmax (masked)", "topological_order": ">#1 a",
         "unbroadcast": "by your unbroadcast", "matmul_backward": "by your matmul_backward",
         "dropout": "your dropout&#39;s mask", "cross_entropy": "your cross_entropy", "split_heads": "your split_heads",
         "merge_heads": "your merge_heads(x)",
         "warmup": "your warm-up schedule", "causal_mask": "your causal_mask(8)",
         "positional_encoding": "your sinusoidal_table(64, 32)"}


def test_every_exercise_has_a_picture_or_says_why_not():
    assert sorted(e.name for e in tinylearn.EXERCISES if e.draw is not None) == sorted(DRAWN)
    for exercise in tinylearn.EXERCISES:
        assert (exercise.draw is None) == bool(exercise.no_picture), exercise.name
    with pytest.raises(ValueError, match="exercise 11 \\(adam_update\\) has no picture: Adam's update is not an op"):
        tinylearn.draw("adam_update", fn=abs)
    passed = str(tinylearn.check("adam_update", tinylearn.find("adam_update").solution))
    assert "No picture for this one: Adam's update" in passed and "tinylearn draw" not in passed


@pytest.mark.parametrize("name", sorted(DRAWN))
def test_draw_shows_the_learners_op(name, tmp_path):
    """The picture is made from the learner's function (it ran, and its label is in the SVG), and the pass
    message offers the command that draws it."""
    exercise = tinylearn.find(name)
    calls = []

    def mine(*args, **kwargs):
        calls.append(1)
        return exercise.solution(*args, **kwargs)
    path = tinylearn.draw(name, tmp_path / "mine.svg", fn=mine)
    text = path.read_text(encoding="utf-8")
    assert calls and text.lstrip().startswith(("<?xml", "<svg")) and DRAWN[name] in text.replace("&#160;", " ")
    assert f"python -m tinylearn draw {exercise.number}" in str(tinylearn.check(name, exercise.solution))


def test_the_order_picture_numbers_the_nodes_in_the_learners_order(tmp_path):
    backwards = tinylearn.draw("topological_order", tmp_path / "o.svg", fn=lambda root: reference_order(root)[::-1])
    text = backwards.read_text(encoding="utf-8").replace("&#160;", " ")
    assert ">#1 y" in text and ">#1 a" not in text


def test_the_cross_entropy_picture_runs_the_learners_loss_and_the_engine_is_restored():
    """The loss node the picture shows is the learner's value (cross_entropy_with_value); afterwards the
    engine's cross_entropy is its own again."""
    logits = Tensor(np.array([[1.0, 2.0, 0.5]]), requires_grad=True)
    with swapped(functional, "cross_entropy_op", cross_entropy_with_value(lambda x, t, eps: 7.25)):
        mine = functional.cross_entropy(logits, np.array([1]), label_smoothing=0.1)
    mine.backward()
    assert mine.item() == 7.25 and logits.grad.shape == (1, 3)
    assert functional.cross_entropy(logits, np.array([1])).item() == pytest.approx(0.46437, abs=1e-5)


def test_solution_shows_the_projects_code_and_why():
    text = tinylearn.solution(6)
    assert "def softmax_forward" in text and "_row_max(z)" in text and "Why: " in text


def test_check_of_one_exercise_takes_under_ten_seconds_warm():
    exercise = tinylearn.find("softmax")
    tinylearn.check(exercise.name, exercise.solution)
    for exercise in tinylearn.EXERCISES:
        start = time.perf_counter()
        assert tinylearn.check(exercise.name, exercise.solution)
        assert time.perf_counter() - start < 10, exercise.name


# ---------------------------------------------------------------- the command line, as a new learner
def learn(folder, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYGRAD_LITE_")}
    return subprocess.run([sys.executable, "-m", "tinylearn", *args], cwd=folder, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.cli
def test_a_new_learner_fixes_softmax_from_the_command_line(tmp_path):
    assert "   6  softmax" in learn(tmp_path, "list").stdout
    assert learn(tmp_path, "start", "6").returncode == 0
    path = tmp_path / "06_softmax.py"
    written(path, NO_SHIFT)
    wrong = learn(tmp_path, "check", "6")
    assert wrong.returncode == 1 and "The mistake: no max shift — your softmax overflows at x = 1000" in wrong.stdout
    path.write_text(path.read_text().replace(NO_SHIFT, FIXED))
    right = learn(tmp_path, "check", "softmax")
    assert right.returncode == 0 and right.stdout.startswith("✓ 6 softmax"), right.stdout + right.stderr
    assert "✓  6  softmax" in learn(tmp_path, "list").stdout
    drawn = learn(tmp_path, "draw", "6", "--out", "mine.svg")
    assert drawn.returncode == 0 and (tmp_path / "mine.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    unknown = learn(tmp_path, "check", "sofmax")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1 and "did you mean softmax" in unknown.stderr
    not_started = learn(tmp_path, "check", "7")
    assert not_started.returncode == 2 and not_started.stderr.count("\n") == 1
    assert "run `python -m tinylearn start 7` first" in not_started.stderr
    assert "Hint 2 of 4" in learn(tmp_path, "hint", "softmax").stdout
    assert "def softmax_forward" in learn(tmp_path, "solution", "6").stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["06_softmax.py", "mine.svg", workfolder.PROGRESS]


def test_docs_learn_lists_every_exercise_with_the_mistakes_it_names():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "learn.md").read_text(encoding="utf-8")
    for exercise in tinylearn.EXERCISES:
        row = next((line for line in doc.splitlines() if line.startswith(f"| {exercise.number} | `{exercise.name}` |")),
                   "")
        assert row.endswith(" | " + "; ".join(m.name for m in exercise.mistakes) + " |"), exercise.name


TABLE = '''    rates = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)
    table = np.zeros((length, d_model))
    table[:, 0::2] = np.sin(np.arange(length)[:, None] * rates)
    table[:, 1::2] = np.cos(np.arange(length)[:, None] * rates[:d_model // 2])
    return table
'''


@pytest.mark.cli
def test_the_draw_command_a_pass_offers_writes_the_learners_picture(tmp_path):
    assert learn(tmp_path, "start", "17").returncode == 0
    written(tmp_path / "17_positional_encoding.py", TABLE)
    passed = learn(tmp_path, "check", "17")
    offered = next(line.split(": ", 1)[1] for line in passed.stdout.splitlines() if "tinylearn draw" in line)
    assert passed.returncode == 0 and offered == "python -m tinylearn draw 17", passed.stdout
    drawn = learn(tmp_path, *offered.split()[3:])
    picture = tmp_path / "17_positional_encoding.svg"
    assert drawn.returncode == 0 and "your sinusoidal_table(64, 32)" in picture.read_text(encoding="utf-8")
