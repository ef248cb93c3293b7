"""`python -m viz` as a user runs it: each subcommand writes a real file that is read back;
bad input gives one line on stderr, exit code 2 and no traceback (unless --debug)."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from viz.render import RENDERER_ENV, find_renderer

pytestmark = pytest.mark.cli  # whole programs and processes: the same on either path (.ci/run)

REPO = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"
SENTENCE = "这是一个苹果"


def run_viz(*args, env=None):
    environment = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "viz", *map(str, args)], cwd=REPO, env=environment,
                          check=False, capture_output=True, text=True, timeout=300)


def svg_nodes(path) -> list:
    """The text lines of every node of a rendered SVG."""
    root = ET.parse(path).getroot()
    return [[" ".join((t.text or "").replace("\xa0", " ").split()) for t in g.iter(f"{SVG}text")]
            for g in root.iter(f"{SVG}g") if g.get("class") == "node"]


def dot_ops(path) -> list:
    """The label lines of every op node of a .dot file, e.g. ["add_dropout", "= x + dropout(s)"]."""
    ops = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        found = re.match(r'\s*t\d+_op \[label=(?:"((?:[^"\\]|\\.)*)"|([^\s\]]+))', line)
        if found:
            ops.append((found.group(1) if found.group(1) is not None else found.group(2)).split("\\n"))
    return ops


def svg_clusters(path) -> set:
    root = ET.parse(path).getroot()
    return {g.find(f"{SVG}title").text for g in root.iter(f"{SVG}g") if g.get("class") == "cluster"}


@pytest.fixture
def renderer(monkeypatch):
    monkeypatch.delenv(RENDERER_ENV, raising=False)
    if find_renderer() is None:
        pytest.skip("no Graphviz renderer installed (apt-get install graphviz or pip install graphviz-pure)")


def assert_ok(done, out: Path):
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == [str(out)]
    assert out.is_file() and out.stat().st_size > 0


# ---------------------------------------------------------------- subcommands
def test_xor_draws_the_scalar_backprop_graph(tmp_path, renderer):
    out = tmp_path / "xor.svg"
    assert_ok(run_viz("xor", "--points", "4", "--hidden", "4", "--out", out), out)
    nodes = svg_nodes(out)
    labels = {lines[0] for lines in nodes}
    assert {"loss", "L0.n0.w0", "L1.n0.b", "x3[1]"} <= labels  # all 4 XOR points, both layers
    loss = next(lines for lines in nodes if lines[0] == "loss")
    assert loss[2] == "grad 1.0000"
    assert len(nodes) > 100


def test_xor_with_one_point_is_smaller(tmp_path, renderer):
    small, full = tmp_path / "one.svg", tmp_path / "four.svg"
    assert_ok(run_viz("xor", "--points", "1", "--out", small), small)
    assert_ok(run_viz("xor", "--points", "4", "--out", full), full)
    assert len(svg_nodes(small)) < len(svg_nodes(full)) / 2


def svg_size(path) -> tuple:
    """(width, height) of a Graphviz SVG in its own units, points (1/72 inch)."""
    root = ET.parse(path).getroot()
    return tuple(float(root.get(side).removesuffix("pt")) for side in ("width", "height"))


def test_default_xor_picture_is_readable_at_full_size(tmp_path, renderer):
    """The default is one point through MLP(2, [2, 1]): about 50 nodes, not 300, and a picture
    about one screen wide (the 4-point graph was 5,873 pt wide)."""
    out = tmp_path / "xor.svg"
    assert_ok(run_viz("xor", "--out", out), out)
    nodes = svg_nodes(out)
    assert 20 <= len(nodes) <= 80
    assert {"loss", "L0.n1.w1", "L1.n0.b", "x0[1]"} <= {lines[0] for lines in nodes}
    width, height = svg_size(out)
    assert width <= 2000 and height <= 2000, (width, height)
    help_text = run_viz("xor", "--help").stdout
    assert "--points 4" in " ".join(help_text.split())


def test_xor_pdf_of_all_four_points_is_written(tmp_path, renderer):
    out = tmp_path / "xor.pdf"
    assert_ok(run_viz("xor", "--points", "4", "--hidden", "4", "--out", out), out)
    pdf = out.read_bytes()
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")


def test_mlp_draws_the_tensor_backprop_graph(tmp_path, renderer):
    out = tmp_path / "mlp.svg"
    assert_ok(run_viz("mlp", "--sizes", "2,8,8,1", "--out", out), out)
    nodes = svg_nodes(out)
    weights = [lines for lines in nodes if lines[0].endswith(".weight")]
    assert [w[:2] for w in weights] == [["0.weight", "(8, 2) float32"], ["2.weight", "(8, 8) float32"],
                                        ["4.weight", "(1, 8) float32"]]
    assert all(w[2].startswith("grad norm ") for w in weights)
    assert {"cluster_0", "cluster_2", "cluster_4"} <= svg_clusters(out)


@pytest.mark.parametrize("backend", ["default", "numba"])
def test_transformer_depth_2_is_readable(tmp_path, renderer, backend):
    """The step is recorded under fast.plain() (the kernels' NumPy twins) whatever TINYGRAD_LITE_BACKEND says."""
    out = tmp_path / "t.svg"
    env = {} if backend == "default" else {"TINYGRAD_LITE_BACKEND": backend}
    assert_ok(run_viz("transformer", "--depth", "2", "--out", out, env=env), out)
    nodes = svg_nodes(out)
    assert len(nodes) <= 60
    titles = {lines[0] for lines in nodes}
    assert {"encoder.layers.0 (EncoderLayer)", "encoder.layers.1 (EncoderLayer)",
            "decoder.layers.0 (DecoderLayer)", "decoder.layers.1 (DecoderLayer)", "generator (Linear)",
            "cross_entropy"} <= titles
    assert {"cluster_encoder.layers", "cluster_decoder.layers"} <= svg_clusters(out)


def test_transformer_flags_change_the_model(tmp_path, renderer):
    out = tmp_path / "t.png"
    assert_ok(run_viz("transformer", "--layers", "3", "--d-model", "16", "--heads", "2", "--depth", "2",
                      "--out", out), out)
    image = mpimg.imread(out)
    assert min(image.shape[:2]) > 100 and image[..., :3].std() > 0.05
    svg = tmp_path / "t.svg"
    assert_ok(run_viz("transformer", "--layers", "3", "--d-model", "16", "--heads", "2", "--out", svg), svg)
    titles = {lines[0] for lines in svg_nodes(svg)}
    assert "encoder.layers.2 (EncoderLayer)" in titles and "decoder.layers.3 (DecoderLayer)" not in titles
    layer = next(lines for lines in svg_nodes(svg) if lines[0] == "encoder.layers.0 (EncoderLayer)")
    d, d_ff = 16, 64  # 4 attention projections, 2 FFN linears, 2 LayerNorms
    assert layer[2] == f"{4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + 2 * 2 * d:,} params"


def test_transformer_expand_opens_one_layer(tmp_path, renderer):
    out = tmp_path / "t.svg"
    assert_ok(run_viz("transformer", "--expand", "encoder.layers.0", "--out", out), out)
    titles = {lines[0] for lines in svg_nodes(out)}
    assert "encoder.layers.0.self_attn (MultiHeadAttention)" in titles
    assert "encoder.layers.1 (EncoderLayer)" in titles


def test_transformer_graph_is_the_plain_formula_by_default(tmp_path):
    """Eq. 1 as matmul, softmax, ·V; the FFN's relu; layer_norm: no fused op of the fast paths."""
    out = tmp_path / "t.dot"
    assert_ok(run_viz("transformer", "--depth", "none", "--layers", "1", "--out", out), out)
    names = [lines[0].split()[0] for lines in dot_ops(out)]
    assert {"matmul", "softmax", "relu", "layer_norm"} <= set(names)
    assert not [n for n in names if n.startswith("fused_") or n in ("add_dropout", "linear_relu_dropout")]
    assert names.count("softmax") == 3  # encoder self-, decoder self- and cross-attention
    assert [lines[0] for lines in dot_ops(out)].count("softmax (masked)") == 3  # padding and causal masks
    assert all(len(lines) == 1 for lines in dot_ops(out))  # no op carries a fused formula


def test_gpt_graph_is_the_plain_formula_with_one_causal_softmax_per_block(tmp_path):
    out = tmp_path / "g.dot"
    assert_ok(run_viz("gpt", "--depth", "none", "--layers", "2", "--out", out), out)
    names = [lines[0] for lines in dot_ops(out)]
    assert names.count("softmax (masked)") == 2 and names.count("gelu") == 2  # a causal mask, GELU per block
    assert {"matmul", "layer_norm", "embedding", "cross_entropy"} <= {n.split()[0] for n in names}
    assert not [n for n in names if n.startswith("fused_") or n in ("add_dropout", "linear_relu_dropout")]


def test_attention_draws_a_gpt_checkpoints_causal_maps(tmp_path):
    import tinygrad_lite as tl
    from transformer.gpt import GPT, GPTConfig
    from transformer.gpt.tokenizers import CharTokenizer

    tokenizer = CharTokenizer.train("ROMEO: hello\nJULIET: hi")
    tl.manual_seed(0)
    GPT(GPTConfig(vocab_size=tokenizer.vocab_size, n_layer=2, n_head=2, n_embd=16, block_size=16)).save(
        tmp_path / "gpt.safetensors", {"tokenizer": tokenizer.to_dict()})
    out = tmp_path / "a.png"
    assert_ok(run_viz("attention", "--checkpoint", tmp_path / "gpt.safetensors", "ROMEO: hi", "--out", out), out)
    bad = run_viz("attention", "--checkpoint", tmp_path / "gpt.safetensors", "ROMEO: Z", "--out", out)
    assert bad.returncode == 2 and "'Z'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_fast_draws_the_step_as_training_runs_it_the_compiled_plan(tmp_path):
    out = tmp_path / "f.dot"
    assert_ok(run_viz("transformer", "--depth", "none", "--layers", "1", "--fast", "--out", out), out)
    source = out.read_text(encoding="utf-8")
    fused = re.findall(r'op\d+ \[label="(\w+)\\n\(', source)
    # one encoder and one decoder layer: 3 attention blocks, 2 feed-forwards, 2 + 3 residuals
    assert fused.count("fused_attention") == 3 and fused.count("linear_relu_dropout") == 2
    assert fused.count("add_dropout") == 5 and "softmax" not in fused
    assert source.count('label="rule: attention"') == 3


@pytest.mark.parametrize("command", ["transformer", "gpt"])
def test_help_says_what_compiled_and_fast_draw(command):
    done = run_viz(command, "--help")
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "--compiled, --fast" in text and "fast.plain()" in text and "rule" in text


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An untrained translator with a tiny vocabulary, saved in the real checkpoint format."""
    from tinygrad_lite import manual_seed
    from transformer import Transformer
    from transformer.data import Vocab
    from transformer.translator import Translator

    src_vocab, tgt_vocab = Vocab(list(SENTENCE)), Vocab(["this", "is", "an", "apple"])
    manual_seed(0)
    model = Transformer(len(src_vocab), len(tgt_vocab), d_model=16, h=2, N=2, d_ff=32, dropout=0.0)
    path = tmp_path_factory.mktemp("ckpt") / "translator.safetensors"
    Translator(model, src_vocab, tgt_vocab, max_train_len=4).save(path)
    return path


def test_attention_writes_all_kinds_to_the_one_file_asked_for(tmp_path, checkpoint):
    out = tmp_path / "attn.png"
    done = run_viz("attention", "--checkpoint", checkpoint, SENTENCE, "--out", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == [str(out)]
    assert [p.name for p in tmp_path.iterdir()] == ["attn.png"]
    image = mpimg.imread(out)
    assert min(image.shape[:2]) > 100 and image[..., :3].std() > 0.02
    cross = tmp_path / "cross.png"
    assert run_viz("attention", "--checkpoint", checkpoint, SENTENCE, "--kind", "cross", "--out",
                   cross).returncode == 0
    assert mpimg.imread(cross).shape[0] < image.shape[0] / 2, "--kind all should stack three sections"


def test_attention_single_kind_goes_to_the_exact_path(tmp_path, checkpoint):
    out = tmp_path / "cross.svg"
    done = run_viz("attention", "--checkpoint", checkpoint, SENTENCE, "--kind", "cross", "--out", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out) and [p.name for p in tmp_path.iterdir()] == ["cross.svg"]
    ET.parse(out)


def run_translate(*args):
    return subprocess.run([sys.executable, "-m", "transformer", "translate", *map(str, args)], cwd=REPO,
                          env={**os.environ, "TINYGRAD_LITE_BACKEND": "numpy"}, check=False,
                          capture_output=True, text=True, timeout=300)


def test_translate_show_attention_writes_the_same_one_figure(tmp_path, checkpoint):
    """Both commands draw through one function: same file name, same picture."""
    shown, drawn = tmp_path / "shown" / "attn.png", tmp_path / "drawn" / "attn.png"
    done = run_translate("--checkpoint", checkpoint, SENTENCE, "--show-attention", shown)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() and f"wrote {shown}" in done.stderr.splitlines()
    assert [p.name for p in shown.parent.iterdir()] == ["attn.png"]
    assert run_viz("attention", "--checkpoint", checkpoint, SENTENCE, "--out", drawn).returncode == 0
    np.testing.assert_array_equal(mpimg.imread(shown), mpimg.imread(drawn))


def test_translate_show_attention_checks_the_name_before_translating(tmp_path, checkpoint):
    done = run_translate("--checkpoint", checkpoint, SENTENCE, "--show-attention", tmp_path / "attn.jpg")
    assert done.returncode == 2 and not done.stdout
    assert "--show-attention" in done.stderr and "expected one of png, svg, pdf" in done.stderr
    assert "--show-attention" in run_translate("--help").stdout
    assert "ONE image" in " ".join(run_translate("--help").stdout.split())


def test_without_a_renderer_the_dot_source_is_written(tmp_path):
    out = tmp_path / "xor.svg"
    done = run_viz("xor", "--points", "1", "--out", out, env={RENDERER_ENV: "none"})
    assert done.returncode == 0
    dot = tmp_path / "xor.dot"
    assert done.stdout.strip() == str(dot) and dot.read_text().startswith("digraph")
    hint = done.stderr.strip().splitlines()
    assert len(hint) == 1 and "apt-get install graphviz" in hint[0] and "pip install graphviz-pure" in hint[0]


def test_svg_without_the_venv_activated(tmp_path):
    """`venv/bin/python -m viz xor --out x.svg` with a PATH that has neither dot nor the
    environment's scripts directory still finds graphviz-pure next to the interpreter."""
    if shutil.which("graphviz-pure", path=sysconfig.get_path("scripts")) is None:
        pytest.skip("graphviz-pure is not installed with this interpreter")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != RENDERER_ENV}
    out = tmp_path / "x.svg"
    done = subprocess.run([sys.executable, "-m", "viz", "xor", "--points", "1", "--out", str(out)], cwd=REPO,
                          env={**env, "PATH": str(empty)}, check=False, capture_output=True, text=True,
                          timeout=300)
    assert_ok(done, out)
    assert done.stderr == "" and not (tmp_path / "x.dot").exists()
    assert any(lines and lines[0] == "loss" for lines in svg_nodes(out))


# ---------------------------------------------------------------- bad input
def bad_inputs(tmp_path: Path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory, not a checkpoint")
    return {
        "unknown format": (["xor", "--out", tmp_path / "x.jpg"], "unknown format 'jpg'"),
        "no extension": (["mlp", "--out", tmp_path / "graph"], "no extension"),
        "unwritable dir": (["xor", "--out", a_file / "x.svg"], "not a directory"),
        "missing checkpoint": (["attention", "--checkpoint", tmp_path / "missing.ckpt", SENTENCE, "--out",
                                tmp_path / "a.png"], "missing.ckpt"),
        "not a checkpoint": (["attention", "--checkpoint", a_file, SENTENCE, "--out", tmp_path / "a.png"],
                             "a_file"),
        "d_model vs heads": (["transformer", "--d-model", "30", "--heads", "4", "--out", tmp_path / "t.svg"],
                             "divisible"),
        "unknown module": (["transformer", "--expand", "encoder.nope", "--out", tmp_path / "t.svg"],
                           "'encoder.nope'"),
        "too many nodes": (["transformer", "--depth", "none", "--max-nodes", "50", "--out", tmp_path / "t.svg"],
                           "max_nodes=50"),
        "missing --out": (["xor"], "--out"),
        "unknown command": (["draw"], "invalid choice"),
        "bad depth": (["transformer", "--depth", "deep", "--out", tmp_path / "t.svg"], "deep"),
    }


@pytest.mark.parametrize("case", ["unknown format", "no extension", "unwritable dir", "missing checkpoint",
                                  "not a checkpoint", "d_model vs heads", "unknown module", "too many nodes",
                                  "missing --out", "unknown command", "bad depth"])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, case):
    args, expected = bad_inputs(tmp_path)[case]
    done = run_viz(*args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert expected in lines[0]
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".svg", ".png", ".jpg", ".dot")]


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(tmp_path, where):
    args = ["xor", "--out", tmp_path / "x.jpg"]
    args = ["--debug", *args] if where == "before" else [*args, "--debug"]
    done = run_viz(*args)
    assert done.returncode != 0 and "Traceback" in done.stderr and "unknown format" in done.stderr


def test_a_clean_run_prints_nothing_on_stderr(tmp_path, renderer):
    out = tmp_path / "t.svg"
    done = run_viz("transformer", "--out", out)
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr
