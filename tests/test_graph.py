"""viz.draw_graph and viz.render: graphs are rendered to real files and read back.

SVGs are parsed with xml.etree: node counts of micrograd's `a*b + c`, the data/grad labels,
gradient colouring after backward only, a Transformer's module clusters, and how far
`collapse=` shrinks it. Renderers: Graphviz `dot` and the pip-installed `graphviz-pure` are
each tested when installed (selected through TINYGRAD_LITE_DOT); the no-renderer fallback
(.dot source plus a one-line hint) always is.
"""
import importlib
import math
import os
import shutil
import sysconfig
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from matplotlib import image as mpimg

import viz
from tinygrad_lite import Tensor, Value, fast, kernels, manual_seed, retain_grads
from tinygrad_lite.nn import Linear
from tinygrad_lite.nn import functional as F
from tinygrad_lite.nn import fused as fused_ops
from viz.fast_ops import FAST_OPS
from viz.render import RENDERER_ENV, RendererMissingWarning

render_module = importlib.import_module("viz.render")  # viz.render the name is the function

SVG = "{http://www.w3.org/2000/svg}"
RENDERERS = ("dot", "graphviz-pure")
PLAIN_FILLS = {"white", "#ffffff", "none", "#f2f2f2", "transparent"}
D_MODEL, N, HEADS, VOCAB = 32, 2, 4, 11


# ---------------------------------------------------------------- reading SVGs back
def _text(element) -> str:
    return " ".join((element.text or "").replace("\xa0", " ").split())


def _first_shape(group):
    for element in group.iter():
        if element.tag in (f"{SVG}polygon", f"{SVG}path", f"{SVG}ellipse"):
            return element
    return None


def read_svg(path):
    """{'nodes': [...], 'clusters': [...], 'edges': [...]}, each item a dict with the group's
    title, its text lines, and the fill/stroke of its first shape."""
    root = ET.parse(path).getroot()
    found = {"node": [], "cluster": [], "edge": []}
    for group in root.iter(f"{SVG}g"):
        kind = group.get("class")
        if kind not in found:
            continue
        shape = _first_shape(group)
        found[kind].append({
            "title": _text(group.find(f"{SVG}title")),
            "lines": [_text(t) for t in group.iter(f"{SVG}text")],
            "fill": None if shape is None else (shape.get("fill") or "").lower(),
            "stroke": None if shape is None else (shape.get("stroke") or "").lower(),
            "shape": None if shape is None else shape.tag[len(SVG):],
        })
    found["caption"] = [_text(t) for t in root.iter(f"{SVG}text")]
    return {"nodes": found["node"], "clusters": found["cluster"], "edges": found["edge"],
            "all_text": " | ".join(found["caption"])}


def node_with(svg, text):
    matches = [n for n in svg["nodes"] if any(text in line for line in n["lines"])]
    assert matches, f"no node shows {text!r}; nodes show {[n['lines'] for n in svg['nodes']][:20]}"
    return matches[0]


def rgb(colour):
    assert colour.startswith("#") and len(colour) == 7, colour
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def coloured(items):
    return [i for i in items if i["fill"] not in PLAIN_FILLS]


def black_edges(svg):
    return all(e["stroke"] in ("black", "#000000") for e in svg["edges"])


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module", autouse=True)
def numpy_kernels():
    """The graphs do not depend on the kernel backend; the NumPy twins spare a Numba compile."""
    with kernels.use_backend("numpy"):
        yield


@pytest.fixture(params=RENDERERS)
def renderer(request, monkeypatch):
    """Each installed renderer in turn, chosen the way a user would: TINYGRAD_LITE_DOT."""
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} is not installed")
    monkeypatch.setenv(RENDERER_ENV, request.param)
    return request.param


@pytest.fixture
def any_renderer(monkeypatch):
    monkeypatch.delenv(RENDERER_ENV, raising=False)
    found = viz.find_renderer()
    if found is None:
        pytest.skip("no Graphviz renderer installed (apt-get install graphviz or pip install graphviz-pure)")
    return found


def micrograd_example(backward=True):
    """The README example of micrograd's draw_dot: d = a*b + c."""
    a, b, c = Value(2.0, label="a"), Value(-3.0, label="b"), Value(10.0, label="c")
    e = a * b
    e.label = "e"
    d = e + c
    d.label = "d"
    if backward:
        d.backward()
    return a, b, c, e, d


def record_transformer_step():
    """One training step of a d_model=32, N=2 Transformer, keeping every intermediate grad."""
    from transformer import Transformer

    manual_seed(0)
    model = Transformer(VOCAB, VOCAB, d_model=D_MODEL, h=HEADS, N=N, d_ff=2 * D_MODEL, dropout=0.1)
    src, tgt = np.array([[1, 2, 3, 4, 5]]), np.array([[1, 2, 3, 4]])
    logits = model(src, tgt)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), np.array([2, 3, 4, 5]))
    with retain_grads():
        loss.backward()
    return model, loss


@pytest.fixture(scope="module")
def transformer_step():
    """The step as the pictures show it: recorded under fast.plain(), the formula op by op."""
    with fast.plain():
        return record_transformer_step()


def recorded_ops(root) -> list:
    """The op of every recorded node that `root` depends on, once per node."""
    ops, seen, stack = [], set(), [root]
    while stack:
        t = stack.pop()
        if id(t) not in seen:
            seen.add(id(t))
            ops += [t._op] if t._prev else []
            stack.extend(t._prev)
    return ops


# ---------------------------------------------------------------- scalar graphs
def test_micrograd_expression_gives_exactly_its_seven_nodes(renderer, tmp_path):
    *_, d = micrograd_example()
    svg = read_svg(viz.render(d, tmp_path / "abc.svg"))
    assert len(svg["nodes"]) == 7
    records = [n for n in svg["nodes"] if any(line.startswith("data ") for line in n["lines"])]
    ops = sorted(n["lines"][0] for n in svg["nodes"] if n not in records)
    assert len(records) == 5 and ops == ["*", "+"]
    assert len(svg["edges"]) == 6  # a, b -> * -> e;  e, c -> + -> d


def test_node_count_matches_micrograds_own_graph(tmp_path, any_renderer):
    """micrograd draws one node per Value and one per op: count those in micrograd's graph."""
    engine = pytest.importorskip("micrograd.engine")
    a, b, c = engine.Value(2.0), engine.Value(-3.0), engine.Value(10.0)
    out = (a * b + c).relu() * a
    values, stack = set(), [out]
    while stack:
        v = stack.pop()
        if v not in values:
            values.add(v)
            stack.extend(v._prev)
    expected = len(values) + sum(1 for v in values if v._prev)
    a2, b2, c2 = Value(2.0), Value(-3.0), Value(10.0)
    ours = (a2 * b2 + c2).relu() * a2
    assert len(read_svg(viz.render(ours, tmp_path / "g.svg"))["nodes"]) == expected


def test_labels_carry_label_data_and_grad(renderer, tmp_path):
    a, b, c, e, d = micrograd_example()
    svg = read_svg(viz.render(d, tmp_path / "abc.svg"))
    for v in (a, b, c, e, d):
        node = node_with(svg, f"data {v.data:.4f}")
        assert node["lines"] == [v.label, f"data {v.data:.4f}", f"grad {v.grad:.4f}"]
    # the chain rule by hand: dd/da = b, dd/db = a
    assert node_with(svg, "data 2.0000")["lines"][2] == f"grad {b.data:.4f}"
    assert node_with(svg, "data -3.0000")["lines"][2] == f"grad {a.data:.4f}"


def test_tiny_and_huge_numbers_keep_their_digits(tmp_path, any_renderer):
    x = Value(3e-7, label="x")
    y = x * 2e8
    y.backward()
    svg = read_svg(viz.render(y, tmp_path / "g.svg"))
    assert node_with(svg, "data 3.000e-07")["lines"][2] == "grad 2.000e+08"


def test_scalar_grad_colouring_only_after_backward(renderer, tmp_path):
    *_, d = micrograd_example(backward=False)
    before = read_svg(viz.render(d, tmp_path / "before.svg"))
    assert not coloured(before["nodes"]) and black_edges(before)
    assert "gradient norm" not in before["all_text"]
    d.backward()
    after = read_svg(viz.render(d, tmp_path / "after.svg"))
    assert len(coloured(after["nodes"])) == 7 and not black_edges(after)
    assert "gradient norm" in after["all_text"]
    red, _, blue = rgb(node_with(after, "grad -3.0000")["fill"])   # a: the largest |grad|
    assert red > blue
    red, _, blue = rgb(node_with(after, "data 10.0000")["fill"])  # c: the smallest (1)
    assert blue > red


def test_leaves_and_output_are_marked():
    *_, d = micrograd_example()
    source = viz.draw_graph(d).source
    lines = {line.split("[")[0].strip(): line for line in source.splitlines() if "label=" in line}
    leaf_lines = [line for line in lines.values() if "data 2.0000" in line or "data 10.0000" in line]
    assert leaf_lines and all("Mrecord" in line for line in leaf_lines)
    output = next(line for line in lines.values() if "data 4.0000" in line)
    assert "penwidth=3" in output and "Mrecord" not in output


# ---------------------------------------------------------------- tensor graphs
def linear_step(backward=True):
    manual_seed(1)
    layer = Linear(3, 4)
    layer._name = None
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 6, name="x")
    loss = (layer(x).tanh() ** 2).mean()
    if backward:
        loss.backward()
    return layer, x, loss


def test_tensor_nodes_show_name_shape_dtype_and_grad_norm(renderer, tmp_path):
    layer, _, loss = linear_step()
    svg = read_svg(viz.render(viz.draw_graph(loss, model=layer), tmp_path / "lin.svg"))
    weight = node_with(svg, "weight")
    assert weight["lines"][:2] == ["weight", "(4, 3) float32"]
    assert weight["lines"][2] == f"grad norm {np.linalg.norm(layer.weight.grad):.2e}"
    assert node_with(svg, "bias")["lines"][1] == "(4,) float32"
    assert node_with(svg, "x")["lines"] == ["x", "(2, 3) float32"]  # a constant has no grad
    ops = sorted(n["lines"][0] for n in svg["nodes"] if n["shape"] == "ellipse")
    assert ops == ["linear", "mul 0.125", "pow", "sum", "tanh"]  # mean = sum * (1/8): 1/8 is folded in
    assert node_with(svg, "output")["lines"][1] == "scalar float32"


def test_parameter_names_come_from_the_model_or_the_tensor_name():
    layer, _, loss = linear_step()
    layer.weight.name = "my_weight"
    with_model = viz.draw_graph(loss, model=layer).source
    assert "weight" in with_model
    unnamed_graph = (Tensor(layer.weight.data, requires_grad=True, name="my_weight") * 2).sum()
    assert "my_weight" in viz.draw_graph(unnamed_graph).source


def test_vanishing_and_exploding_gradients_stand_out(tmp_path, any_renderer):
    tiny = Tensor(np.ones(3, dtype=np.float32), requires_grad=True, name="tiny")
    huge = Tensor(np.ones(3, dtype=np.float32), requires_grad=True, name="huge")
    loss = (tiny * 1e-6).sum() + (huge * 1e6).sum()
    loss.backward()
    svg = read_svg(viz.render(loss, tmp_path / "g.svg"))
    r, _, b = rgb(node_with(svg, "tiny")["fill"])
    assert b > r
    r, _, b = rgb(node_with(svg, "huge")["fill"])
    assert r > b
    assert f"{math.sqrt(3) * 1e-6:.2e}" in svg["all_text"] and f"{math.sqrt(3) * 1e6:.2e}" in svg["all_text"]
    assert "retain_grads" in svg["all_text"]  # intermediates hold no grad: the caption says how


def test_show_grad_false_draws_plain_graph():
    *_, loss = linear_step()
    source = viz.draw_graph(loss, show_grad=False).source
    assert "grad norm" not in source and "fillcolor=\"#" not in source


# ---------------------------------------------------------------- a whole Transformer
def test_transformer_clusters_are_named_by_module_path(transformer_step, tmp_path, any_renderer):
    model, loss = transformer_step
    graph = viz.draw_graph(loss, model=model)
    svg = read_svg(viz.render(graph, tmp_path / "full.svg"))
    clusters = {c["title"] for c in svg["clusters"]}
    for path in ("encoder.layers.0", "encoder.layers.1", "decoder.layers.0", "decoder.layers.1",
                 "encoder.layers.0.self_attn", "decoder.layers.1.cross_attn", "decoder.layers.1.feed_forward",
                 "src_embed", "positional_encoding", "generator"):
        assert f"cluster_{path}" in clusters
    labels = {c["lines"][0] for c in svg["clusters"]}
    assert {"encoder.layers.0 (EncoderLayer)", "decoder.layers.1.cross_attn (MultiHeadAttention)"} <= labels
    assert node_with(svg, "encoder.layers.0.self_attn.w_q.weight")["lines"][1] == f"({D_MODEL}, {D_MODEL}) float32"
    # uncollapsed, every op of the step is drawn, with its output tensor
    ops, seen, stack = 0, set(), [loss]
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        ops += bool(t._op)
        stack.extend(t._prev)
    assert ops > 60 and len(svg["nodes"]) >= 2 * ops  # an op node and its output tensor node


def test_parameters_sit_in_the_cluster_of_their_module(transformer_step):
    model, loss = transformer_step
    stack, owner = [], {}
    for line in viz.draw_graph(loss, model=model).source.splitlines():
        line = line.strip()
        if line.startswith("subgraph"):
            stack.append(line.split()[1].strip('"'))
        elif line == "}" and stack:
            stack.pop()
        elif "label=" in line and stack:
            for name, _ in model.named_parameters():
                if f"{name} " in line.replace("\\", " ") or f"{name} |" in line:
                    owner.setdefault(name, stack[-1])
    assert owner["encoder.layers.0.self_attn.w_q.weight"] == "cluster_encoder.layers.0.self_attn.w_q"
    assert owner["generator.bias"] == "cluster_generator"
    assert len(owner) == len(list(model.named_parameters()))


def test_collapse_2_draws_figure_1_in_at_most_60_nodes(transformer_step, renderer, tmp_path):
    model, loss = transformer_step
    full = viz.draw_graph(loss, model=model).stats["nodes"]
    svg = read_svg(viz.render(viz.draw_graph(loss, model=model, collapse=2), tmp_path / "d2.svg"))
    assert len(svg["nodes"]) <= 60 and len(svg["nodes"]) * 10 < full
    boxes = sorted(n["lines"][0].split(" call")[0] for n in svg["nodes"] if "params" in " ".join(n["lines"]))
    assert boxes == sorted(["src_embed (Embeddings)", "tgt_embed (Embeddings)",
                            "positional_encoding (PositionalEncoding)", "positional_encoding (PositionalEncoding)",
                            "encoder.layers.0 (EncoderLayer)", "encoder.layers.1 (EncoderLayer)",
                            "decoder.layers.0 (DecoderLayer)", "decoder.layers.1 (DecoderLayer)",
                            "generator (Linear)"])
    assert any(n["lines"] == ["cross_entropy"] for n in svg["nodes"])


def test_collapsed_box_reports_shapes_params_and_param_grad_norm(transformer_step, tmp_path, any_renderer):
    model, loss = transformer_step
    svg = read_svg(viz.render(viz.draw_graph(loss, model=model, collapse=2), tmp_path / "d2.svg"))
    layer = model.decoder.layers[0]
    box = node_with(svg, "decoder.layers.0 (DecoderLayer)")["lines"]
    params = list(layer.parameters())
    norm = math.sqrt(sum(float(np.sum(p.grad.astype(np.float64) ** 2)) for p in params))
    assert box[1] == f"in (1, 4, {D_MODEL}), (1, 5, {D_MODEL}) -> out (1, 4, {D_MODEL})"
    assert box[2] == f"{sum(p.numel() for p in params):,} params"
    assert box[3] == f"param grad norm {norm:.2e}"
    # the positional encoding ran twice: two boxes, numbered in running order (source first)
    calls = [n["lines"] for n in svg["nodes"] if n["lines"][0].startswith("positional_encoding")]
    assert sorted(c[0][-3:] for c in calls) == ["1/2", "2/2"]
    first = next(c for c in calls if c[0].endswith("1/2"))
    assert first[1] == f"in (1, 5, {D_MODEL}) -> out (1, 5, {D_MODEL})"


def test_collapse_3_and_expand_show_attention_add_norm_and_ffn(transformer_step, tmp_path, any_renderer):
    model, loss = transformer_step
    sub_blocks = {"encoder.layers.0.self_attn (MultiHeadAttention)", "encoder.layers.0.add_norm1 (AddNorm)",
                  "encoder.layers.0.feed_forward (PositionwiseFeedForward)", "encoder.layers.0.add_norm2 (AddNorm)"}
    depth3 = read_svg(viz.render(viz.draw_graph(loss, model=model, collapse=3), tmp_path / "d3.svg"))
    titles = {n["lines"][0] for n in depth3["nodes"]}
    assert sub_blocks <= titles and "decoder.layers.1.cross_attn (MultiHeadAttention)" in titles
    assert len(depth3["nodes"]) <= 60
    expanded = read_svg(viz.render(viz.draw_graph(loss, model=model, collapse=2, expand=["encoder.layers.0"]),
                                   tmp_path / "e.svg"))
    titles = {n["lines"][0] for n in expanded["nodes"]}
    assert sub_blocks <= titles and "encoder.layers.1 (EncoderLayer)" in titles
    assert "encoder.layers.0 (EncoderLayer)" not in titles
    assert "cluster_encoder.layers.0" in {c["title"] for c in expanded["clusters"]}


def test_model_is_found_from_the_scopes_when_not_given(transformer_step):
    model, loss = transformer_step
    assert viz.draw_graph(loss, collapse=2).source == viz.draw_graph(loss, model=model, collapse=2).source


def test_transformer_grad_colouring_only_after_backward(transformer_step, tmp_path, any_renderer):
    model, _ = transformer_step
    logits = model(np.array([[1, 2, 3]]), np.array([[1, 2]]))
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), np.array([2, 3]))
    model.zero_grad()
    before = read_svg(viz.render(viz.draw_graph(loss, model=model, collapse=2), tmp_path / "before.svg"))
    assert not coloured(before["nodes"]) and black_edges(before)
    assert not any("grad norm" in line for n in before["nodes"] for line in n["lines"])
    with retain_grads():
        loss.backward()
    after = read_svg(viz.render(viz.draw_graph(loss, model=model, collapse=2), tmp_path / "after.svg"))
    assert len(coloured(after["nodes"])) == len(after["nodes"]) and not black_edges(after)
    assert "gradient norm (log10 colour scale)" in after["all_text"]


# ---------------------------------------------------------------- plain and fast paths
def test_the_plain_step_shows_the_formula_op_by_op(transformer_step):
    """Under fast.plain(): Eq. 1 as matmul, softmax, dropout, matmul; the FFN's relu; layer_norm."""
    model, loss = transformer_step
    ops = [op.split()[0] for op in recorded_ops(loss)]  # "softmax (masked)" counts as softmax
    assert {"matmul", "softmax", "dropout", "relu", "layer_norm"} <= set(ops)
    assert not [op for op in ops if op in FAST_OPS or op.startswith("fused")]
    assert ops.count("softmax") == 3 * N and ops.count("relu") == 2 * N  # attention blocks, FFNs
    assert "fast path" not in viz.draw_graph(loss, model=model).source


def test_every_op_in_the_formula_table_is_one_the_engine_records():
    """FAST_OPS is keyed by the names the fused ops record; a renamed op would lose its label."""
    manual_seed(0)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32), requires_grad=True)
    real = np.array([[True, True, False], [True, False, False]])
    back = fused_ops.repad(fused_ops.unpad(x, real), real)
    layer = Linear(4, 4)
    hidden = fused_ops.linear_relu_dropout(fused_ops.add_dropout(x, back, p=0.1), layer.weight, layer.bias, p=0.1)
    loss = fused_ops.fused_attention(hidden, hidden, hidden, dropout_p=0.1, heads=2).sum()
    assert set(FAST_OPS) <= set(recorded_ops(loss))
    source = viz.draw_graph(loss).source
    for op, formula in FAST_OPS.items():
        assert f"{op}\\n= {formula}" in source


# ---------------------------------------------------------------- rendering
def test_png_is_a_sane_non_blank_picture(transformer_step, renderer, tmp_path):
    model, loss = transformer_step
    path = viz.render(loss, tmp_path / "t.png", model=model, collapse=2, rankdir="TB")
    image = mpimg.imread(path)
    height, width = image.shape[:2]
    assert 200 <= height <= 20000 and 200 <= width <= 20000
    assert image[..., :3].std() > 0.05


def test_pdf_is_written(renderer, tmp_path):
    *_, d = micrograd_example()
    path = viz.render(d, tmp_path / "abc.pdf")
    assert path.read_bytes().startswith(b"%PDF") and path.stat().st_size > 500


def test_fmt_overrides_the_extension_and_dot_needs_no_renderer(tmp_path, monkeypatch):
    monkeypatch.setenv(RENDERER_ENV, "none")
    *_, d = micrograd_example()
    path = viz.render(d, tmp_path / "graph.txt", fmt="dot")
    assert path.name == "graph.txt" and path.read_text().startswith("digraph")


def test_system_dot_is_preferred_and_graphviz_pure_is_the_fallback(tmp_path, monkeypatch):
    monkeypatch.delenv(RENDERER_ENV, raising=False)
    if shutil.which("dot"):
        assert viz.find_renderer().name == "Graphviz dot"
    pure = shutil.which("graphviz-pure")
    if pure is None:
        pytest.skip("graphviz-pure is not installed")
    only_pure = tmp_path / "bin"
    only_pure.mkdir()
    os.symlink(pure, only_pure / "graphviz-pure")
    monkeypatch.setenv("PATH", str(only_pure))
    assert viz.find_renderer().name == "graphviz-pure"
    *_, d = micrograd_example()
    assert len(read_svg(viz.render(d, tmp_path / "abc.svg"))["nodes"]) == 7


def graphviz_pure_beside_interpreter() -> str:
    """graphviz-pure in this interpreter's scripts directory (a venv's bin/), or skip."""
    command = shutil.which("graphviz-pure", path=sysconfig.get_path("scripts"))
    if command is None:
        pytest.skip("graphviz-pure is not installed with this interpreter")
    return command


def test_graphviz_pure_next_to_the_interpreter_needs_no_path(tmp_path, monkeypatch):
    """As `venv/bin/python -m viz ...` runs with the venv not activated (IDE, cron, Jupyter)."""
    monkeypatch.delenv(RENDERER_ENV, raising=False)
    beside = graphviz_pure_beside_interpreter()
    monkeypatch.setenv("PATH", str(tmp_path))
    found = viz.find_renderer()
    assert found is not None and found.name == "graphviz-pure" and found.command == beside
    *_, d = micrograd_example()
    assert len(read_svg(viz.render(d, tmp_path / "abc.svg"))["nodes"]) == 7
    monkeypatch.setattr(render_module, "interpreter_script_dirs", list)
    found = viz.find_renderer()  # e.g. `pip install --target`: found from the package's file list
    assert found.name == "graphviz-pure" and os.path.samefile(found.command, beside)


@pytest.mark.parametrize("hide", ["env", "path"])
def test_without_a_renderer_the_dot_source_is_written_with_a_one_line_hint(tmp_path, monkeypatch, hide):
    if hide == "env":
        monkeypatch.setenv(RENDERER_ENV, "none")
    else:  # nothing on PATH, and no graphviz-pure installed with this interpreter
        monkeypatch.delenv(RENDERER_ENV, raising=False)
        monkeypatch.setenv("PATH", str(tmp_path))
        monkeypatch.setattr(render_module, "interpreter_script_dirs", list)
        monkeypatch.setattr(render_module, "_installed_script", lambda name: None)
    *_, d = micrograd_example()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = viz.render(d, tmp_path / "out" / "abc.svg")
    assert path == tmp_path / "out" / "abc.dot" and not (tmp_path / "out" / "abc.svg").exists()
    assert path.read_text() == viz.draw_graph(d).source
    hints = [w for w in caught if issubclass(w.category, RendererMissingWarning)]
    assert len(hints) == 1
    message = str(hints[0].message)
    assert "\n" not in message and "apt-get install graphviz" in message and "pip install graphviz-pure" in message


def test_renderer_failure_leaves_no_partial_file(tmp_path, monkeypatch):
    if shutil.which("false") is None:
        pytest.skip("no `false` command")
    monkeypatch.setenv(RENDERER_ENV, "false")
    *_, d = micrograd_example()
    with pytest.raises(RuntimeError, match="failed to draw svg"):
        viz.render(d, tmp_path / "abc.svg")
    assert list(tmp_path.iterdir()) == []


def test_render_leaves_no_temporary_files(tmp_path, any_renderer):
    *_, d = micrograd_example()
    viz.render(d, tmp_path / "abc.svg")
    viz.render(d, tmp_path / "abc.svg")  # replacing an existing file
    assert [p.name for p in tmp_path.iterdir()] == ["abc.svg"]


def test_jupyter_display_uses_the_found_renderer(monkeypatch, any_renderer):
    *_, d = micrograd_example()
    graph = viz.draw_graph(d)
    assert isinstance(graph, viz.GraphView)
    bundle = graph._repr_mimebundle_()
    assert "<svg" in bundle["image/svg+xml"] and "data 2.0000" in bundle["image/svg+xml"]
    monkeypatch.setenv(RENDERER_ENV, "none")
    assert "pip install graphviz-pure" in graph._repr_mimebundle_()["text/plain"]



def test_jupyter_display_needs_no_system_dot(tmp_path, monkeypatch):
    """A Jupyter kernel started from an unactivated venv: no dot, no scripts dir on PATH."""
    monkeypatch.delenv(RENDERER_ENV, raising=False)
    graphviz_pure_beside_interpreter()
    monkeypatch.setenv("PATH", str(tmp_path))
    formatters = pytest.importorskip("IPython.core.formatters")
    *_, d = micrograd_example()
    graph = viz.draw_graph(d)
    data, _ = formatters.DisplayFormatter().format(graph)
    svg = data["image/svg+xml"]
    assert len(ET.fromstring(svg.encode()).findall(".//{http://www.w3.org/2000/svg}g[@class='node']")) == 7
    assert list(tmp_path.iterdir()) == []

# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("root", [3.0, "loss", None, np.ones(3), [], [Value(1.0), Tensor([1.0])]])
def test_root_must_be_a_value_or_tensor(root):
    with pytest.raises(TypeError, match="draw_graph: root") as info:
        viz.draw_graph(root)
    assert "Value or" in str(info.value)
    if root is not None and not isinstance(root, list):
        assert type(root).__name__ in str(info.value)


def test_too_many_nodes_is_refused_with_a_hint(transformer_step):
    model, loss = transformer_step
    full = viz.draw_graph(loss, model=model).stats["nodes"]
    with pytest.raises(ValueError, match=f"{full:,} nodes, more than max_nodes=100.*collapse="):
        viz.draw_graph(loss, model=model, max_nodes=100)
    assert viz.draw_graph(loss, model=model, collapse=2, max_nodes=100).stats["nodes"] <= 60
    *_, d = micrograd_example()
    with pytest.raises(ValueError, match="7 nodes, more than max_nodes=6"):
        viz.draw_graph(d, max_nodes=6)


@pytest.mark.parametrize("name, fmt", [("g.jpg", None), ("g.svg", "bmp"), ("graph", None)])
def test_unknown_format_lists_the_allowed_ones(tmp_path, name, fmt):
    *_, d = micrograd_example()
    with pytest.raises(ValueError, match=r"\.?svg, \.?png, \.?pdf") as info:
        viz.render(d, tmp_path / name, fmt=fmt)
    assert "render" in str(info.value)
    assert not list(tmp_path.iterdir())


def test_unwritable_directory_names_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv(RENDERER_ENV, "none")
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    *_, d = micrograd_example()
    for fmt in ("svg", "dot"):
        with pytest.raises(OSError, match="a_file") as info:
            viz.render(d, blocker / f"graph.{fmt}")
        assert "not a directory" in str(info.value)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_directory_names_the_path(tmp_path, any_renderer):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    *_, d = micrograd_example()
    try:
        with pytest.raises(OSError, match="locked"):
            viz.render(d, locked / "g.svg")
    finally:
        locked.chmod(0o700)


def test_bad_options_are_named(transformer_step):
    model, loss = transformer_step
    *_, d = micrograd_example()
    with pytest.raises(ValueError, match="rankdir"):
        viz.draw_graph(d, rankdir="UP")
    with pytest.raises(ValueError, match="collapse"):
        viz.draw_graph(loss, collapse=-1)
    with pytest.raises(ValueError, match="Value graph has no modules"):
        viz.draw_graph(d, collapse=2)
    with pytest.raises(ValueError, match="'encoder.layer.0'"):
        viz.draw_graph(loss, model=model, collapse=2, expand=["encoder.layer.0"])
    with pytest.raises(TypeError, match="model must be"):
        viz.draw_graph(loss, model="transformer")
    with pytest.raises(ValueError, match="unknown format 'gif'"):
        viz.draw_graph(d, fmt="gif")
    with pytest.raises(TypeError, match="draw options"):
        viz.render(viz.draw_graph(d), "g.svg", collapse=2)
