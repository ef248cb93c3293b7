"""The backward stepper (viz.explore, python -m viz explore) without a browser: the page is one
offline file, the numbers it embeds are the engine's .grad and .data, every op the engine records
has its local rule, and bad --out gives one line and exit code 2."""
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinygrad_lite.autograd import toposort
from viz import explore
from viz.__main__ import build_parser, gpt_step, mlp_step, transformer_step, xor_step
from viz.explorer.page import embedded_data
from viz.explorer.rules import is_known, local_rule
from viz.explorer.trace import NOTE_NO_RETAINED
from viz.fast_ops import FAST_OPS
from viz.render import find_renderer

REPO = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)

pytestmark = pytest.mark.skipif(find_renderer() is None, reason="no Graphviz renderer (pip install graphviz-pure)")


def run_viz(*args):
    return subprocess.run([sys.executable, "-m", "viz", *map(str, args)], cwd=REPO, env=dict(os.environ),
                          check=False, capture_output=True, text=True, timeout=300)


def step(*argv):
    """The CLI's own step for `explore ARGV` (same defaults), run in this process."""
    args = build_parser().parse_args(["explore", *argv, "--out", "unused.html"])
    return {"xor": xor_step, "mlp": mlp_step, "transformer": transformer_step, "gpt": gpt_step}[args.model](args)


def engine_order(loss) -> list:
    """The nodes in the order the engine's backward visits them."""
    if hasattr(loss, "requires_grad"):
        return list(reversed(toposort(loss)))
    order = loss.topological_order()  # (this zeroes the interior grads, so backward runs again)
    for v in order:
        v.grad = 0.0
    loss.backward()
    return list(reversed(order))


def assert_shows_engine_numbers(data, loss):
    order = engine_order(loss)
    assert len(data["steps"]) == len(order) > 0
    for k, engine in enumerate(order):
        node = data["nodes"][data["steps"][k]]
        grad = np.asarray(engine.grad, dtype=np.float64).reshape(-1)
        value = np.asarray(engine.data, dtype=np.float64).reshape(-1)
        assert node["op"] == engine._op and node["step"] == k
        assert node["grad"]["n"] == grad.size and node["value"]["n"] == value.size
        np.testing.assert_allclose(node["grad"]["head"], grad[:16], rtol=1e-7, atol=0)
        np.testing.assert_allclose(node["value"]["head"], value[:16], rtol=1e-7, atol=0)
        np.testing.assert_allclose(node["grad"]["norm"], np.linalg.norm(grad), rtol=1e-6)
        assert node["grad"]["truncated"] == (grad.size > 16)


def assert_contributions_add_up(data, fan_out: bool):
    """Each node's gradient is the sum (+=) of what its consumers sent it; with `fan_out`, some
    node has several consumers."""
    checked, several = 0, 0
    for node in data["nodes"]:
        if node["grad"] is None or not node["from"] or node["grad"]["truncated"]:
            continue
        total = np.sum([c["grad"]["head"] for c in node["from"]], axis=0)
        np.testing.assert_allclose(total, node["grad"]["head"], rtol=1e-5, atol=1e-7)
        checked += 1
        several += len(node["from"]) > 1
    assert checked > 0 and (several > 0) == fan_out


# ---------------------------------------------------------------- the page
def test_xor_page_is_one_offline_file_holding_the_engines_gradients(tmp_path):
    out = tmp_path / "xor.html"
    done = run_viz("explore", "xor", "--out", out)
    assert done.returncode == 0 and done.stdout.strip() == str(out), done.stderr
    page = out.read_text(encoding="utf-8")
    assert not OUTSIDE.search(page) and "<link" not in page and "<script src" not in page
    assert "<svg" in page and 'id="grad-view"' in page and "dataset.node" in page
    data = embedded_data(page)
    loss, _ = step("xor")
    assert_shows_engine_numbers(data, loss)
    assert_contributions_add_up(data, fan_out=True)
    assert data["nodes"][data["steps"][0]]["grad"]["head"] == [1.0]


def test_tensor_mlp_page_holds_the_engines_gradients(tmp_path):
    loss, model = step("mlp")
    page = explore(loss, model)
    assert_shows_engine_numbers(page.data, loss)
    assert_contributions_add_up(page.data, fan_out=False)
    names = {n["label"] for n in page.data["nodes"]}
    assert {name for name, _ in model.named_parameters()} <= names
    written = page.save(tmp_path / "sub" / "mlp.html")
    assert embedded_data(written.read_text(encoding="utf-8")) == page.data


def test_modules_fold_into_boxes_that_open_and_close():
    loss, model = step("transformer")
    data = explore(loss, model, depth=2).data
    default = data["views"]["default"]
    opens = default["clicks"]
    assert "module:encoder.layers.0" in opens.values()
    layer = data["views"]["module:encoder.layers.0"]
    assert layer["clicks"]["cluster_encoder.layers.0"] == "default"
    assert len(layer["svg"]) > len(default["svg"])
    inside = [i for i, keys in default["keys"].items() if default["boxes"].get(keys[0]) == "encoder.layers.0"]
    assert len(inside) > 10
    opened = {layer["boxes"].get(layer["keys"][i][0], "an op of its own") for i in inside}
    assert len(opened) > 2 and not opened & {"encoder.layers.0", "encoder", ""}


def test_too_few_module_states_say_which_option_lays_out_more(tmp_path):
    loss, model = step("transformer")
    assert not [n for n in explore(loss, model, depth=2).data["notes"] if "module states" in n]
    out = tmp_path / "t.html"
    done = run_viz("explore", "transformer", "--max-views", "3", "--out", out)
    assert done.returncode == 0, done.stderr
    data = embedded_data(out.read_text(encoding="utf-8"))
    [note] = [n for n in data["notes"] if "module states" in n]
    assert "only 3 module states" in note and "--max-views 6" in note and "--expand PATH" in note
    assert len(data["views"]) == 3
    with pytest.raises(ValueError, match="explore: max_views"):
        explore(loss, model, depth=2, max_views=0)


def test_repr_html_is_an_inline_iframe_of_the_page():
    loss, _ = step("xor", "--points", "1")
    page = explore(loss)
    shown = page._repr_html_()
    srcdoc = re.match(r'<iframe srcdoc="([^"]*)"', shown)
    assert srcdoc and html.unescape(srcdoc.group(1)) == page.html


def test_a_graph_without_retained_gradients_says_what_is_missing():
    from tinygrad_lite import Tensor

    w = Tensor(np.arange(4, dtype=np.float32).reshape(2, 2), requires_grad=True)
    loss = ((w * w).sum() * 2.0)
    loss.backward()
    data = explore(loss).data
    assert NOTE_NO_RETAINED in data["notes"]
    np.testing.assert_array_equal(data["nodes"][data["steps"][-1]]["grad"]["head"], (4 * w.data).ravel())


def test_bad_roots_are_refused():
    from tinygrad_lite.scalar import Value

    with pytest.raises(TypeError, match="Tensor or Value"):
        explore(3.0)
    with pytest.raises(ValueError, match="backward"):
        explore(Value(2.0) * Value(3.0))
    loss, _ = step("xor", "--points", "1")
    with pytest.raises(ValueError, match="no modules"):
        explore(loss, depth=1)


# ---------------------------------------------------------------- the local rules
def recorded_ops(loss) -> set:
    seen, stack, ops = set(), [loss], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        ops.add(node._op)
        stack.extend(node._prev)
    return ops - {""}


@pytest.mark.parametrize("model", ["xor", "mlp", "transformer", "gpt"])
def test_every_op_of_a_step_has_its_local_rule(model):
    ops = recorded_ops(step(model)[0])
    assert len(ops) >= 3
    assert [op for op in ops if not is_known(op)] == []


def test_every_op_the_engine_can_record_has_its_local_rule():
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tinygrad_lite").rglob("*.py"))
    named = set(re.findall(r"""_(?:make|apply)\([^"'\n]*["']([a-z_ ()]+)["']""", source))
    named |= set(re.findall(r"""\bop = ["']([a-z_]+)["']""", source))
    named |= set(re.findall(r"""Value\([^\n]*\(self(?:, \w+)?\), ["']([^"']+)["']""", source))
    named |= {"softmax (masked)", "getitem", "**2", "**-1", "**0.5", *FAST_OPS}
    assert len(named) > 40
    assert sorted(op for op in named if not is_known(op)) == []
    assert "unknown op" in local_rule("frobnicate") and "leaf" in local_rule("")


# ---------------------------------------------------------------- the command line
@pytest.mark.parametrize("args, expected", [
    (["explore", "xor", "--out", "{tmp}/x.svg"], "expected one of html"),
    (["explore", "xor", "--out", "{tmp}/a_file/x.html"], "not a directory"),
    (["explore", "--out", "{tmp}/x.html"], "xor, mlp, transformer or gpt"),
    (["explore", "xor", "--depth", "1", "--out", "{tmp}/x.html"], "has none"),
])
def test_bad_out_or_step_is_one_line_and_exit_code_2(tmp_path, args, expected):
    (tmp_path / "a_file").write_text("a file, not a directory")
    done = run_viz(*[a.format(tmp=tmp_path) for a in args])
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert expected in lines[0]
    assert not list(tmp_path.rglob("*.html"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An untrained translator saved in the real checkpoint format, its vocabulary from the corpus."""
    from tinygrad_lite import manual_seed
    from transformer import Transformer
    from transformer.data import Vocab, builtin_corpus, tokenize_en, tokenize_zh
    from transformer.translator import Translator

    zh, en = builtin_corpus()["train"][0]
    src_vocab, tgt_vocab = Vocab(tokenize_zh(zh)), Vocab(tokenize_en(en))
    manual_seed(0)
    model = Transformer(len(src_vocab), len(tgt_vocab), d_model=16, h=2, N=1, d_ff=32, dropout=0.1)
    path = tmp_path_factory.mktemp("ckpt") / "translator.safetensors"
    Translator(model, src_vocab, tgt_vocab).save(path)
    return path


def test_checkpoint_explores_a_training_step_of_the_translator(tmp_path, checkpoint):
    out = tmp_path / "c.html"
    done = run_viz("explore", "--checkpoint", checkpoint, "--out", out)
    assert done.returncode == 0, done.stderr
    data = embedded_data(out.read_text(encoding="utf-8"))
    labels = {n["label"] for n in data["nodes"]}
    assert "encoder.layers.0.self_attn.w_q.weight" in labels
    assert data["nodes"][data["steps"][0]]["op"] == "cross_entropy"
    assert all(is_known(n["op"]) for n in data["nodes"])
    assert data["title"] == f"backward, step by step: the translator {checkpoint}"
    assert "smoothing" not in data["nodes"][data["steps"][0]]["rule"]  # this one trained with none


def test_a_translator_trained_with_label_smoothing_has_it_in_its_rule(tmp_path):
    from tinygrad_lite import manual_seed
    from transformer import Transformer
    from transformer.data import Vocab, builtin_corpus, tokenize_en, tokenize_zh
    from transformer.translator import Translator

    zh, en = builtin_corpus()["train"][0]
    manual_seed(0)
    model = Transformer(len(Vocab(tokenize_zh(zh))), len(Vocab(tokenize_en(en))), d_model=8, h=2, N=1, d_ff=16)
    Translator(model, Vocab(tokenize_zh(zh)), Vocab(tokenize_en(en))).save(
        tmp_path / "t.safetensors", train_state={"train_config": {"label_smoothing": 0.1}})
    done = run_viz("explore", "--checkpoint", tmp_path / "t.safetensors", "--out", tmp_path / "t.html")
    assert done.returncode == 0, done.stderr
    data = embedded_data((tmp_path / "t.html").read_text(encoding="utf-8"))
    rule = data["nodes"][data["steps"][0]]["rule"]
    assert "label smoothing" in rule and "ε = 0.1" in rule


def test_a_translators_page_carries_the_chinese_font_for_its_own_characters(tmp_path, checkpoint):
    """No CJK font on the machine draws the corpus pair as tofu, so the page embeds the bundled
    font cut to the page's Chinese characters and names its family in the style."""
    import base64
    import io

    from fontTools.ttLib import TTFont

    from viz.font_face import BUNDLED_FONT_FAMILY, cjk_characters

    out = tmp_path / "c.html"
    assert run_viz("explore", "--checkpoint", checkpoint, "--out", out).returncode == 0
    page = out.read_text(encoding="utf-8")
    chinese = cjk_characters(page)
    assert len(chinese) >= 4 and any(n["label"].startswith("loss on ") and cjk_characters(n["label"])
                                     for n in embedded_data(page)["nodes"])
    face = re.search(r'@font-face \{ font-family: "([^"]+)";[^}]*base64,([A-Za-z0-9+/=]+)', page)
    assert face and face.group(1) == BUNDLED_FONT_FAMILY and f'sans-serif, "{BUNDLED_FONT_FAMILY}"' in page
    font = TTFont(io.BytesIO(base64.b64decode(face.group(2))))
    assert set(chinese) <= {chr(c) for c in font.getBestCmap()} and len(face.group(2)) < 300_000


def test_checkpoint_explores_a_training_step_of_a_gpt_on_its_own_text(tmp_path):
    """A GPT checkpoint (the shape `gpt train` writes: the tokenizer and the run's data in its
    metadata): one step on a window of that text, the loss named by the window."""
    from tinygrad_lite import manual_seed
    from transformer.gpt import GPT, GPTConfig
    from transformer.gpt.tokenizers import CharTokenizer

    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 20
    (tmp_path / "input.txt").write_text(text, encoding="utf-8")
    tokenizer = CharTokenizer.train(text)
    manual_seed(0)
    GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=16)).save(
        tmp_path / "gpt.safetensors", {"tokenizer": tokenizer.to_dict(),
                                        "train_config": {"data": str(tmp_path / "input.txt")}})
    out = tmp_path / "g.html"
    done = run_viz("explore", "--checkpoint", tmp_path / "gpt.safetensors", "--out", out)
    assert done.returncode == 0, done.stderr
    data = embedded_data(out.read_text(encoding="utf-8"))
    labels = {n["label"] for n in data["nodes"]}
    assert "blocks.0.attn.w_q.weight" in labels and "token_embedding.weight" in labels
    assert data["nodes"][data["steps"][0]]["op"] == "cross_entropy"
    assert all(is_known(n["op"]) for n in data["nodes"])
    assert any(n["label"].startswith("loss on ") and set(n["label"][9:17]) <= set(text) for n in data["nodes"])
    assert "GPT" in data["title"] and "translator" not in data["title"]
    rule = data["nodes"][data["steps"][0]]["rule"]
    assert "softmax(z) − onehot(target)" in rule and "smoothing" not in rule
