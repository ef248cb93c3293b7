"""bench/gpt.py --products: the products it times alone are the ones a training step of ours multiplies
(same shapes and layouts, counted by watching nn.functional's product), and the run reports the bound."""
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def layout(a):
    return a.shape, a.flags.c_contiguous


def test_step_products_are_the_steps_products(monkeypatch):
    import gpt as bench

    import tinygrad_lite as tl
    from tinygrad_lite import dispatch
    from tinygrad_lite.nn import functional
    from transformer.gpt import GPT, GPTConfig
    tl.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, n_layer=2, n_head=2, n_embd=16, block_size=8, dropout=0.0, bias=False))
    seen, plain = [], functional._product

    def spy(a, b):
        seen.append((layout(a), layout(b)))
        return plain(a, b)
    monkeypatch.setattr(functional, "_product", spy)
    monkeypatch.setitem(dispatch.TWINS, "linear", dispatch.formula("linear"))  # its twin's products: inside Numba
    ids = np.random.default_rng(0).integers(0, 11, (3, 8))
    recipe = bench.settings("recipe", 11)[2]                     # AdamW: no products beside the step's own
    step = bench.steppers(model, None, None, recipe, compiled=False)["ours"]  # eager: one call of each product
    step((ids, np.roll(ids, -1, axis=1)), recipe.learning_rate)
    pairs = bench.step_products(model, 3 * 8)
    assert Counter(seen) == Counter((layout(a), layout(b)) for a, b in pairs)
    assert len(pairs) == 3 * (2 * 6 + 1)


def test_the_bound_is_reported(tmp_path):
    pytest.importorskip("torch")
    text = tmp_path / "input.txt"
    text.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 20, encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpt.py"), "--quick", "--products", "--data", str(text),
                           "--json", str(tmp_path / "g.jsonl")], cwd=ROOT, capture_output=True, text=True, timeout=240,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads((tmp_path / "g.jsonl").read_text())
    assert row["products_per_step"] == 3 * (6 + 1) and row["ms_products"] > 0 and row["bound_torch_over_products"] > 0
    assert "torch / products (the bound)" in done.stdout
