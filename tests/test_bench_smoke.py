"""The benchmark scripts still run: each with --quick on a toy model (seconds, no timing checks).

They compare against PyTorch, so these need torch. Each run writes JSON lines that are checked
for the fields the README tables are made from, and for the in-run sanity checks (both engines
start from the same loss; greedy decoding gives the same tokens on both).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cli  # whole programs and processes: the same on either path (.ci/run)

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent


def run(script, *args, timeout=240):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_train_throughput_quick(tmp_path):
    out = run("train_throughput.py", "--json", str(tmp_path / "t.jsonl"))
    (row,) = rows(tmp_path / "t.jsonl")
    assert row["tok_s_ours"] > 0 and row["tok_s_torch"] > 0 and row["threads"] == 1
    assert abs(row["initial_loss_ours"] - row["initial_loss_torch"]) < 1e-3 * row["initial_loss_torch"]
    assert row["peak_rss_mb_ours"] > 0 and row["peak_rss_mb_torch"] > 0
    assert "| quick | 1 |" in out and "WARNING" not in out
    assert row["gflop_s_ours"] > 0 and row["gflop_s_blas"] > 0 and 0 < row["blas_bound_share_torch"]
    assert "ours % of bound" in out
    assert row["gflop_s_products"] > 0 and 0 < row["products_share_ours"] and "ours % of own products" in out


def test_compiled_step_quick(tmp_path):
    """Eager against compiled, every workload: the rules-off compiled step equals eager bit for bit; with
    --rules, the rules-on step agrees with the rules-off one (within 1e-4)."""
    out = run("compiled_step.py", "--json", str(tmp_path / "s.jsonl"))
    found = rows(tmp_path / "s.jsonl")
    assert [r["workload"] for r in found] == ["mlp", "gpt", "tiny", "small"]
    assert all(r["bit_exact"] and r["eager ms"] > 0 and r["compiled ms"] > 0 for r in found)
    assert "| small | yes |" in out
    run("compiled_step.py", "--rules", "--workloads", "tiny", "--json", str(tmp_path / "r.jsonl"))
    (rule_row,) = rows(tmp_path / "r.jsonl")
    assert rule_row["bit_exact"] and rule_row["agrees"] and rule_row["rules on ms"] > 0


def test_step_ceiling_quick(tmp_path):
    """The products are timed inside our step, so they take less than it; the ceiling is PyTorch's step over
    them plus Adam's update alone."""
    out = run("step_ceiling.py", "--json", str(tmp_path / "c.jsonl"))
    (row,) = rows(tmp_path / "c.jsonl")
    assert 0 < row["products_ms"] < row["ours_ms"] and row["adam_ms"] > 0 and row["torch_ms"] > 0
    assert row["ceiling"] > 0
    assert row["copy_GBs"] > 0 and "ceiling with every other op free" in out


def test_first_calls_quick(tmp_path):
    """The toy step's forward ops, each timed at its place and again at once: the linears, layer norms and the loss."""
    out = run("first_calls.py", "--json", str(tmp_path / "f.jsonl"))
    found = rows(tmp_path / "f.jsonl")
    ops = {r["op"] for r in found}
    assert {"linear_op", "layer_norm_op", "cross_entropy_op"} <= ops
    assert all(r["calls"] >= 1 and r["first_us"] > 0 and r["again_us"] > 0 for r in found)
    assert "first / again" in out


def test_native_share_quick(tmp_path):
    """The toy step's Numba kernels and products, timed inside it: they take part of the step, not more."""
    out = run("native_share.py", "--json", str(tmp_path / "n.jsonl"))
    (row,) = rows(tmp_path / "n.jsonl")
    names = {name for name, _, _ in row["kernels"]}
    assert {"linear product (BLAS)", "layernorm.forward", "adam"} <= names
    assert 0 < row["native_ms"] < row["plain_ms"] and 0 < row["native_share"] < 1
    assert row["calls_a_step"] > 50 and "native share" in out


def test_train_throughput_names_blas_kernels_chosen_by_the_environment(monkeypatch):
    """OPENBLAS_CORETYPE (set on some machines) overrides OpenBLAS's own kernel choice: the header
    says so, with the command that measures a default install; without it, nothing is claimed."""
    sys.path.insert(0, str(ROOT / "bench"))
    import train_throughput as bench
    for name in bench.BLAS_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    assert "chosen by" not in bench.environment(1, None)["blas"]
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    blas = bench.environment(1, None)["blas"]
    assert "kernels chosen by OPENBLAS_CORETYPE=Haswell, not by OpenBLAS" in blas
    assert "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE" in blas


def test_train_throughput_isa_avx2_holds_every_engine_to_avx2():
    """--isa avx2 reruns the benchmark with these variables: no AVX-512 feature is left for Numba
    (so the panels' wide vectors stay off), OpenBLAS and torch take their AVX2 kernels."""
    sys.path.insert(0, str(ROOT / "bench"))
    import train_throughput as bench
    env = bench.avx2_environment()
    features = env["NUMBA_CPU_FEATURES"].split(",")
    assert features and not [f for f in features if f.startswith("+avx512")]
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["NUMBA_CPU_NAME"] == "haswell" and env[bench.ISA_ENV_VAR] == "avx2"
    from llvmlite import binding
    host = binding.get_host_cpu_features().flatten().split(",")
    assert ("+avx2" in host) == ("+avx2" in features) and len(host) == len(features)  # the rest as the host's


def test_train_throughput_counts_every_linear_weight():
    """The FLOP counter's linear products are 2·rows per weight of the model's Linear layers (every
    layer sees B·T rows when S = T), and the backward doubles the forward."""
    sys.path.insert(0, str(ROOT / "bench"))
    import train_throughput as bench

    from tinygrad_lite.nn import Linear
    cfg = bench.CONFIGS["small"]
    model = bench.build_ours(cfg)
    weights = sum(m.weight.data.size for _, m in model.named_modules() if isinstance(m, Linear))
    products = bench.step_products(cfg)
    forward = products[:len(products) // 3]
    rows = cfg.batch * cfg.tokens
    assert sum(p.flops for p in forward if p.batch == 1) == 2 * rows * weights
    assert bench.step_flops(cfg) == 3 * sum(p.flops for p in forward)


def test_decode_quick(tmp_path):
    out = run("decode.py", "--json", str(tmp_path / "d.jsonl"))
    found = rows(tmp_path / "d.jsonl")
    assert [r["batch"] for r in found] == [1, 4]
    for r in found:
        assert r["same_tokens"] == 1.0 and r["sent_s_ours_cache"] > 0 and r["sent_s_ours_no_cache"] > 0
    assert "ours (cache) sent/s" in out


def test_scaling_quick(tmp_path):
    png = tmp_path / "scaling.png"
    out = run("scaling.py", "--no-memory", "--out", str(png), "--json", str(tmp_path / "s.jsonl"))
    assert [r["tokens"] for r in rows(tmp_path / "s.jsonl")] == [16, 32]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "fitted time exponent (ours)" in out


def test_torch_recipe_quick_engines_agree_without_dropout(tmp_path):
    for engine in ("torch", "ours"):
        run("torch_recipe.py", "--engine", engine, "--dropout", "0", "--json", str(tmp_path / "r.jsonl"))
    torch_run, ours_run = rows(tmp_path / "r.jsonl")
    assert [r["step"] for r in torch_run["curve"]] == [r["step"] for r in ours_run["curve"]] == [6, 12]
    for a, b in zip(torch_run["curve"], ours_run["curve"]):
        for key in ("train_loss", "dev_per_token", "dev_tutorial"):
            assert abs(a[key] - b[key]) < 1e-3 * b[key], (key, a, b)
    assert torch_run["curve"][-1]["dev_per_token"] < torch_run["curve"][0]["dev_per_token"] + 0.5


def test_torch_recipe_tutorial_loss_weighs_batches_not_tokens():
    sys.path.insert(0, str(ROOT / "bench"))
    from torch_recipe import dev_losses

    src = [[5]] * 128
    tgt = [[2, 5, 3]] * 64 + [[2, 5, 5, 5, 5, 5, 5, 3]] * 64   # 2 then 7 predicted tokens a pair
    per_token, tutorial = dev_losses(lambda b: (1.0 if b.tgt.shape[1] == 3 else 3.0, int((b.tgt[:, 1:] > 0).sum())),
                                     src, tgt)
    assert tutorial == pytest.approx(2.0)
    assert per_token == pytest.approx((1.0 * 128 + 3.0 * 448) / 576)


def test_gpt_quick(tmp_path):
    """bench/gpt.py on a toy GPT and a small text: both sides train from the same weights on the same
    batches, so their losses agree at every step."""
    text = tmp_path / "input.txt"
    text.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 20, encoding="utf-8")
    out = run("gpt.py", "--data", str(text), "--json", str(tmp_path / "g.jsonl"))
    (row,) = rows(tmp_path / "g.jsonl")
    assert row["it_s_ours"] > 0 and row["it_s_torch"] > 0 and row["threads"] == 1
    assert row["tok_s_ours"] == pytest.approx(row["it_s_ours"] * row["batch"] * row["block_size"])
    assert len(row["losses"]) >= 2 and row["max_loss_difference"] < 1e-4 * row["initial_loss_torch"]
    assert "| quick | 1 |" in out and "WARNING" not in out


def test_gpt_recipe_quick(tmp_path):
    """bench/gpt_recipe.py on a toy GPT: the same weights, batches and schedule on both sides, so their
    losses agree at every evaluation of the whole validation split."""
    text = tmp_path / "input.txt"
    text.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 20, encoding="utf-8")
    out = run("gpt_recipe.py", "--data", str(text), "--json", str(tmp_path / "r.jsonl"))
    (row,) = rows(tmp_path / "r.jsonl")
    assert [e[0] for e in row["evaluations"]] == [0, 10, 20] and row["iters"] == 20
    assert row["max_val_difference"] < 1e-4 and row["final_val_ours"] < row["evaluations"][0][3]
    assert row["it_s_ours"] > 0 and row["it_s_torch"] > 0 and "| quick | 20 |" in out


def test_memory_quick(tmp_path):
    """bench/memory.py samples RSS through a short toy Trainer run and reports the growth."""
    pytest.importorskip("psutil")
    out = run("memory.py", "--json", str(tmp_path / "m.jsonl"))
    samples = rows(tmp_path / "m.jsonl")
    assert [s["step"] for s in samples] == [3, 6, 9, 12] and all(s["rss_mb"] > 50 for s in samples)
    assert "| step | epoch | RSS MB |" in out and "growth over the last half: RSS " in out
