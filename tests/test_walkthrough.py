"""transformer.walkthrough (the article, runnable): every section's computation matches the
article's numbers (at the article's printed precision), the lesson ships inside the installed
package, and its command lines (`python -m transformer explain`, examples/walkthrough.py) behave."""
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import transformer
import transformer.walkthrough as wt
import viz.plots
from tinygrad_lite import fast, kernels
from transformer.walkthrough import end_to_end, sections

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "walkthrough.py"

# The article's numbers, as printed there.
LOOKUP_SOFTMAX_3_DECIMALS = [0.789]
LOOKUP_SOFTMAX_4_DECIMALS = [0.0001, 0.1068, 0.0393, 0.0648]
T10_SOFTMAX = [0.1255, 0.1533, 0.0342, 0.6870]
FIGURES = ["positional_encoding.png", "softmax_temperature.png", "attention_6_tokens.png",
           "gradient_descent.png"]


# The command-line tests check the script's behaviour, not the kernels: NumPy twins skip the JIT.
# No PYTHONPATH: the subprocesses must find `transformer` the way a user's does, as installed.
SUBPROCESS_ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                  "TINYGRAD_LITE_BACKEND": "numpy", "OMP_NUM_THREADS": "1",
                  "NUMBA_NUM_THREADS": "1"}


def run_script(*args, cwd=None):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False,
                          encoding="utf-8", cwd=cwd, timeout=120, env=SUBPROCESS_ENV)


# ---------------------------------------------------------------- the sections
def test_xor_needs_a_hidden_layer_and_linear_stacks_collapse():
    r = wt.section_xor()
    assert r["single_correct"] < 4
    assert r["single_loss"] > math.log(2) - 1e-9  # no linear model beats the constant 1/2 on XOR
    assert r["stack_correct"] < 4
    assert r["mlp_correct"] == 4
    assert r["mlp_loss"] < 0.1 and np.abs(r["mlp_logits"]).min() > 1  # right by a margin
    assert r["collapse_error"] < 1e-12
    assert r["stack_collapse_error"] < 1e-9


def test_descent_steps_follow_the_gradient_and_the_learning_rate_decides():
    r = wt.section_descent()
    for label, lr in r["learning_rates"].items():
        path = r["paths"][label]
        x, y = path[0]
        np.testing.assert_allclose(path[1], [x - lr * 2 * x, y - lr * 20 * y], rtol=1e-12)
    start = wt.descent_loss(*r["paths"]["good"][0])
    assert r["final_loss"]["good"] < 1e-2
    assert r["final_loss"]["too small"] > 100 * r["final_loss"]["good"]
    assert r["final_loss"]["too large"] > start  # lr above 2/20 diverges along y


def test_embedding_is_six_tokens_by_512_and_static():
    r = wt.section_embedding()
    assert r["tokens"] == list("这是一个苹果")
    assert r["shape"] == (6, 512)
    assert len(set(r["ids"].tolist())) == 6
    assert r["static_difference"] == 0
    assert r["context_difference"] > 1e-2


def test_attention_shapes_and_row_softmax():
    r = wt.section_attention()
    assert r["x_shape"] == r["q_shape"] == r["out_shape"] == (6, 512)
    assert r["scores_shape"] == (6, 6)
    w = r["weights"]
    assert w.shape == (6, 6) and (w >= 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    assert r["by_hand_difference"] < 1e-4


def test_lookup_table_matches_the_article_to_its_printed_precision():
    r = wt.section_lookup()
    w = r["weights"]
    np.testing.assert_array_equal(np.round(w[:1], 3), LOOKUP_SOFTMAX_3_DECIMALS)
    np.testing.assert_array_equal(np.round(w[1:], 4), LOOKUP_SOFTMAX_4_DECIMALS)
    assert all(r["matches"])
    scores = np.array([5, -4, 3, 2, 2.5])
    exact = np.exp(scores) / np.exp(scores).sum()
    assert r["result"] == pytest.approx(exact @ np.arange(1, 6), rel=1e-12)
    printed = np.array(LOOKUP_SOFTMAX_3_DECIMALS + LOOKUP_SOFTMAX_4_DECIMALS) @ np.arange(1, 6)
    assert r["result"] == pytest.approx(printed, abs=1e-3)
    assert r["cosine"][0] == pytest.approx(r["cosine"][1]) and r["dots"][1] == 3 * r["dots"][0]


def test_matches_printed_uses_the_printed_precision():
    assert wt.matches_printed(0.78906, "0.789")
    assert not wt.matches_printed(0.7896, "0.789")
    assert wt.matches_printed(0.68700157, "0.6870")
    assert not wt.matches_printed(0.68706, "0.6870")


def test_temperature_values_and_limits():
    r = wt.section_temperature()
    np.testing.assert_array_equal(np.round(r["t10"], 4), T10_SOFTMAX)
    assert r["t1"][3] > 0.9999 and r["t1"].argmax() == 3
    by_t = r["by_temperature"]
    temperatures = sorted(by_t)
    to_one_hot = [np.abs(by_t[t] - np.eye(4)[3]).max() for t in temperatures]
    to_uniform = [np.abs(by_t[t] - 0.25).max() for t in temperatures]
    assert np.all(np.diff(to_one_hot) >= 0) and np.all(np.diff(to_uniform) <= 0)
    assert to_one_hot[0] < 1e-6 and to_uniform[-1] < 1e-3


def test_scaling_restores_unit_variance_and_prevents_saturation():
    r = wt.section_scaling()
    for d_k in (64, 512):
        raw, scaled = r["variances"][d_k]
        assert raw / d_k == pytest.approx(1, abs=0.05)
        assert scaled == pytest.approx(1, abs=0.05)
    assert r["unscaled"]["one_hot_rows"] > 0.5
    assert r["scaled"]["one_hot_rows"] < 0.1
    assert r["unscaled"]["median_grad"] < 1e-6 * r["scaled"]["median_grad"]
    assert r["product_variance_mean_one"] == pytest.approx(3, abs=0.05)


def test_softmax_input_gradient_matches_the_softmax_jacobian():
    """The saturation measurement's autograd against ∂L/∂z = y ⊙ (g − Σ g·y), g = G·Vᵀ."""
    for scaled in (False, True):
        got = wt.softmax_input_gradient(64, scaled, batches=3, tokens=4, seed=1)
        rng = np.random.default_rng(1)
        q, k = rng.standard_normal((2, 3, 4, 64))
        v, g = rng.standard_normal((2, 3, 4, 64))
        z = q @ np.swapaxes(k, -1, -2) / (8.0 if scaled else 1.0)
        y = np.exp(z - z.max(-1, keepdims=True))
        y /= y.sum(-1, keepdims=True)
        upstream = g @ np.swapaxes(v, -1, -2)
        grad = y * (upstream - (upstream * y).sum(-1, keepdims=True))
        assert got["mean_grad"] == pytest.approx(np.abs(grad).mean(), rel=1e-9)
        assert got["mean_largest_weight"] == pytest.approx(y.max(-1).mean(), rel=1e-12)


def test_cross_entropy_gradient_is_prediction_minus_target():
    r = wt.section_xent_grad()
    assert r["z_error"] < 1e-12 and r["fd_error"] < 1e-7
    assert r["w_error"] < 1e-12 and r["b_error"] < 1e-12
    np.testing.assert_allclose(r["saturated_wrong_grad"], [-1, 1, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(r["saturated_right_grad"], 0, atol=1e-12)


def test_multihead_shapes_512_is_8_by_64():
    r = wt.section_multihead()
    s = r["shapes"]
    assert s["x"] == (1, 6, 512) and s["q_heads"] == (1, 8, 6, 64)
    assert s["weights"] == (1, 8, 6, 6) and s["heads"] == (1, 8, 6, 64)
    assert s["concat"] == (1, 6, 512) and s["out"] == (1, 6, 512)
    assert r["d_k"] == 64
    assert r["module_difference"] < 1e-5
    assert r["features_seen"] == 512
    for d_k, (raw, scaled) in r["score_variances"].items():
        assert raw / d_k == pytest.approx(1, abs=0.1) and scaled == pytest.approx(1, abs=0.1)


def test_add_norm_mean_zero_variance_one_then_gamma_beta():
    r = wt.section_addnorm()
    assert r["max_abs_mean"] < 1e-5
    assert r["max_variance_error"] < 1e-3
    assert r["residual_gradient"] > 100 * r["plain_gradient"]
    np.testing.assert_allclose(r["gamma_variance_ratio"], 1, atol=1e-3)
    assert r["quiet_variance"] == pytest.approx(0.5, abs=0.02)  # σ² / (σ² + ε) with σ² = ε


def test_ffn_shapes_and_parameter_shares():
    r = wt.section_ffn()
    assert r["hidden_shape"] == (6, 2048) and r["out_shape"] == (6, 512)
    d, d_ff, vocab, n = 512, 2048, 37000, 6
    ffn = d * d_ff + d_ff + d_ff * d + d
    attention = 4 * (d * d + d)
    encoder_layer, decoder_layer = attention + ffn + 2 * 2 * d, 2 * attention + ffn + 3 * 2 * d
    c = r["counts"]
    assert (c["ffn"], c["encoder_layer"], c["decoder_layer"]) == (ffn, encoder_layer, decoder_layer)
    assert c["total"] == n * (encoder_layer + decoder_layer) + vocab * d + vocab
    assert c["total"] == pytest.approx(65e6, rel=0.05)  # the paper's Table 3: 65 M for base
    assert r["layer_ratio"] == pytest.approx(2 / 3, abs=0.01)
    assert r["decoder_ratio"] == pytest.approx(1 / 2, abs=0.01)
    assert r["model_ratio"] == pytest.approx(0.40, abs=0.01)  # not 2/3 for the encoder-decoder
    assert r["gpt3_ratio"] == pytest.approx(2 / 3, abs=0.01)
    assert r["gpt3_ffn"] == pytest.approx(120e9, rel=0.05)  # the article's "约1200亿"
    assert r["tiny_composed"] == r["tiny_built"]


def test_causal_mask_zeroes_the_future_and_nothing_leaks():
    r = wt.section_causal()
    w = r["weights"]
    assert (w[np.triu_indices(6, 1)] == 0).all()
    assert (np.diag(w) > 0).all()
    np.testing.assert_allclose(w.sum(-1), 1, atol=1e-5)
    assert r["leak"] < 1e-6
    assert r["future_position_moves"]


def test_cross_attention_is_n_by_m():
    r = wt.section_cross()
    n, m = r["n"], r["m"]
    assert (n, m) == (4, 6)
    assert r["q_shape"] == (n, 512) and r["weights_shape"] == (n, m) and r["out_shape"] == (n, 512)
    assert r["multihead_weights_shape"] == (1, 8, n, m) and r["multihead_out_shape"] == (1, n, 512)


def test_positional_encoding_claims():
    r = wt.section_pe()
    pos, i, d = 7, 10, 512
    angle = pos / 10000 ** (2 * i / d)
    assert r["formula_value"] == pytest.approx((math.sin(angle), math.cos(angle)))
    assert max(r["shift_errors"].values()) < 1e-9
    wl = r["wavelengths"]
    assert np.all(np.diff(wl) > 0)
    assert wl[0] == pytest.approx(2 * math.pi) and wl[-1] == pytest.approx(2 * math.pi * 10000 ** (510 / 512))
    assert r["length_error"] < 1e-6
    assert r["boss_difference_without_pe"] < 1e-5
    assert r["boss_difference_with_pe"] > 1e-2


def test_shift_error_detects_a_table_that_is_not_sinusoidal():
    table = transformer.sinusoidal_table(50, 16, dtype=np.float64)
    assert wt.shift_error(table, 3) < 1e-12
    broken = table.copy()
    broken[20, 4] += 0.1
    assert wt.shift_error(broken, 3) > 0.05


def test_translate_without_a_checkpoint_says_how_to_train(monkeypatch, capsys):
    monkeypatch.setattr(end_to_end, "DEFAULT_CHECKPOINT", Path("no-such-dir/checkpoint.safetensors"))
    monkeypatch.setattr(end_to_end, "LATEST_CHECKPOINT", Path("no-such-dir/latest.safetensors"))
    r = wt.section_translate()
    assert r["translation"] is None
    assert "python -m transformer train" in capsys.readouterr().out


def test_translate_with_a_checkpoint(tmp_path):
    import tinygrad_lite as tl
    from transformer import Transformer
    from transformer.data import Vocab, tokenize_en, tokenize_zh
    from transformer.translator import Translator
    tl.manual_seed(0)
    src_vocab = Vocab.build([tokenize_zh("这是一个苹果")])
    tgt_vocab = Vocab.build([tokenize_en("this is an apple")])
    model = Transformer(len(src_vocab), len(tgt_vocab), d_model=16, h=2, N=1, d_ff=32, dropout=0.0)
    path = tmp_path / "tiny.safetensors"
    Translator(model, src_vocab, tgt_vocab).save(path)
    r = wt.section_translate(checkpoint=path, figures=wt.Figures(tmp_path / "fig", viz.plots))
    assert r["checkpoint"] == str(path)
    assert isinstance(r["translation"], str)
    assert all(Path(f).stat().st_size > 0 for f in r["files"])


def test_run_returns_each_named_section():
    results = wt.run(["lookup", "cross"])
    assert list(results) == ["lookup", "cross"]


def test_run_computes_on_the_plain_path_and_restores_the_switches(monkeypatch):
    """What a learner sees comes from the formulas: inside run() every trick is off and the kernels
    run their NumPy twins; afterwards the switches are as they were."""
    seen = {}

    def probe(figures=None):
        seen["tricks"] = {name: getattr(fast.TRICKS, name) for name in fast.NAMES}
        seen["backend"] = kernels.get_backend()
        return {}
    before = {name: getattr(fast.TRICKS, name) for name in fast.NAMES}, kernels.get_backend()
    monkeypatch.setitem(sections.SECTIONS, "probe", probe)
    with fast.tricks_on(), kernels.use_backend("numba"):
        on = {name: getattr(fast.TRICKS, name) for name in fast.NAMES}, kernels.get_backend()
        wt.run(["probe"])
        after = {name: getattr(fast.TRICKS, name) for name in fast.NAMES}, kernels.get_backend()
    assert not any(seen["tricks"].values()) and seen["backend"] == "numpy"
    assert after == on
    assert ({name: getattr(fast.TRICKS, name) for name in fast.NAMES}, kernels.get_backend()) == before


# ---------------------------------------------------------------- the command line
def test_figures_are_written(tmp_path):
    out = tmp_path / "figs"
    proc = run_script("--figures", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in FIGURES:
        path = out / name
        assert path.is_file(), f"{name} missing; stdout tail: {proc.stdout[-500:]}"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000
    for number in range(1, 16):
        assert f"§{number} " in proc.stdout
    # every section names the article's section its claims come from, and states them in our words
    assert proc.stdout.count("[文章小节 article section: ") == 15
    assert proc.stdout.count("论点（转述）") == proc.stdout.count("claim (paraphrased): ") >= 15
    assert "✗" in proc.stdout  # §11: the whole base model is not 2/3 FFN


def test_one_section_runs_alone():
    proc = run_script("--section", "temperature")
    assert proc.returncode == 0, proc.stderr
    assert "§6 " in proc.stdout and "0.6870" in proc.stdout
    assert "§5 " not in proc.stdout and "§7 " not in proc.stdout


def test_unknown_section_exits_2_with_one_line():
    proc = run_script("--section", "bogus")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "bogus" in lines[0]
    for name in wt.SECTIONS:
        assert name in lines[0]
    assert proc.stdout == ""


def test_a_reader_that_stops_early_is_not_an_error():
    """`python examples/walkthrough.py | head -50`: the pipe is closed before the lesson ends (here
    before it starts); the script stops quietly with exit status 0, no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, str(SCRIPT)], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, encoding="utf-8", timeout=120, env=SUBPROCESS_ENV, check=False)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_missing_checkpoint_exits_2(tmp_path):
    assert wt.main(["--section", "lookup", "--checkpoint", str(tmp_path / "none.safetensors")]) == 2


def test_figures_without_a_plotting_module_exit_2_with_one_line(tmp_path, capsys):
    assert wt.main(["--section", "pe", "--figures", str(tmp_path / "figs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--figures" in err[0] and "python -m transformer explain" in err[0]
    assert not (tmp_path / "figs").exists()


def run_explain(*args, cwd):
    return subprocess.run([sys.executable, "-m", "transformer", "explain", *args], check=False,
                          capture_output=True, text=True, encoding="utf-8", cwd=cwd, timeout=120,
                          env=SUBPROCESS_ENV)


def test_runs_through_python_m_transformer_explain():
    proc = run_explain("--", "--section", "lookup", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "§5 " in proc.stdout and "0.1068" in proc.stdout


def test_explain_runs_outside_the_clone(tmp_path):
    """`python -m transformer explain --section 1` from a directory with no examples/ next to it."""
    proc = run_explain("--section", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "§1 " in out and "§2 " not in out
    assert "XOR" in out and "4/4 correct" in out and "claim (paraphrased)" in out
    assert "\n4 ✓, 0 ✗" in out


def test_explain_figures_outside_the_clone(tmp_path):
    proc = run_explain("--section", "pe", "--figures", "figs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / "figs" / "positional_encoding.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_installed_package_holds_the_walkthrough_and_it_does_not_import_viz(tmp_path):
    """Imported from a temp cwd with no PYTHONPATH: the lesson is a module of `transformer`, not a
    file under examples/, and importing it loads neither examples/ nor `viz` (layering)."""
    code = ("import sys, transformer, transformer.walkthrough as w; "
            "assert not any('examples' in p for p in sys.path), sys.path; "
            "assert not any(m == 'viz' or m.startswith('viz.') for m in sys.modules); "
            "print(w.__file__); print(transformer.__file__); print(len(w.SECTIONS))")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          encoding="utf-8", cwd=tmp_path, timeout=120, env=SUBPROCESS_ENV)
    assert proc.returncode == 0, proc.stderr
    module, package, sections = proc.stdout.split()
    assert Path(module).parent == Path(package).parent / "walkthrough" and Path(module).name == "__init__.py"
    assert int(sections) == 15
    assert Path(wt.__file__).parent.parent == Path(transformer.__file__).parent


def test_a_built_wheel_ships_the_walkthrough(tmp_path):
    """What a non-editable `pip install .` gets: the wheel holds transformer/walkthrough/. Built
    from a copy of the packaging files, leaving no build/ or egg-info in the checkout."""
    source = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("tinygrad_lite", "transformer", "viz"):
        shutil.copytree(ROOT / name, source / name, ignore=skip)
    for name in ("setup.cfg", "pyproject.toml", "README.md", "MANIFEST.in", "setup.py"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, source / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-cache-dir", "-q", "-w", str(tmp_path),
                           str(source)],
                          check=False, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "No module named pip" in proc.stderr:
        pytest.skip("pip is not available")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "transformer/walkthrough/__init__.py" in names and "transformer/__main__.py" in names
    assert not any(n.startswith("examples/") for n in names)


def test_the_thin_entry_point_only_calls_the_package():
    text = SCRIPT.read_text(encoding="utf-8")
    assert "from transformer.walkthrough import main" in text
    assert "def section_" not in text and "claim(" not in text
