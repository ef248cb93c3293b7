"""The picture of a compiled step's plan (viz/plan.py, `python -m viz transformer|gpt --compiled`): every op
of the plan is one node, every fusion a cluster that names its rule around the plain ops it replaced."""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from tinygrad_lite.compiler import compile
from viz.plan import compiled_plan, draw_plan
from viz.render import RENDERER_ENV, find_renderer

REPO = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"


def parse(source: str) -> tuple:
    """({node key: (label, cluster name or None)} of each node statement, {cluster: its label})."""
    nodes, clusters, cluster = {}, {}, None
    for line in source.splitlines():
        opened = re.match(r"\s*subgraph (cluster_\w+) \{", line)
        if opened:
            cluster = opened.group(1)
            continue
        if line.strip() == "}":
            cluster = None
            continue
        label = re.search(r'\blabel=(?:"((?:[^"\\]|\\.)*)"|([^\s\]]+))', line)
        text = label and (label.group(1) if label.group(1) is not None else label.group(2))
        if cluster and re.match(r"\s*graph \[", line):
            clusters[cluster] = text
        node = re.match(r"\s*(\w+) \[", line)
        if node and node.group(1) not in ("graph", "node", "edge"):
            assert node.group(1) not in nodes, f"node {node.group(1)} drawn twice"
            nodes[node.group(1)] = (text, cluster)
    return nodes, clusters


def residual_plan(reuse: bool = False):
    """The plan of x + dropout(tanh(x·W)), then (y*y).sum() and backward: one add_dropout to fuse,
    unless the dropout's output is read twice."""
    w = Tensor(np.eye(6) * 0.5, requires_grad=True)

    def step(x):
        d = (x @ w).tanh().dropout(0.3)
        y = x + d
        loss = ((y * d) if reuse else (y * y)).sum()
        loss.backward()
        return loss
    compiled = compile(step)
    tl.manual_seed(0)
    with fast.tricks_on("fused_residual"):
        compiled(Tensor(np.ones((4, 6))))
    return next(iter(compiled.plans.values()))


def assert_drawn(plan, source: str):
    """Every op once, as op<i> labelled with its name and shape; every fusion a cluster naming its rule,
    holding the fused op and its plain ops; nothing else in a cluster."""
    nodes, clusters = parse(source)
    ops = {i for i, r in enumerate(plan.records) if r is not None}
    assert {int(k[2:]) for k in nodes if re.fullmatch(r"op\d+", k)} == ops
    for i in ops:
        label, _ = nodes[f"op{i}"]
        assert label.split("\\n")[0] == plan.records[i].op
        assert str(plan.records[i].shape).replace(",)", ")") in label or plan.records[i].shape == ()
    assert clusters == {f"cluster_rule{i}": f"rule: {rule}" for i, (rule, _) in plan.fusions.items()}
    for i, (rule, replaced) in plan.fusions.items():
        inside = {k: label for k, (label, cluster) in nodes.items() if cluster == f"cluster_rule{i}"}
        assert inside.pop(f"op{i}").startswith(plan.records[i].op)
        assert [inside.get(f"op{i}_was{k}") for k in range(len(replaced))] == list(replaced)
        assert len(inside) == len(replaced)


def test_a_fused_residual_is_a_cluster_named_by_its_rule():
    plan = residual_plan()
    assert [rule for rule, _ in plan.fusions.values()] == ["add_dropout"]
    source = draw_plan(plan).source
    assert_drawn(plan, source)
    assert 'label="rule: add_dropout"' in source
    (i, (_, replaced)), = plan.fusions.items()
    assert replaced == ("dropout", "add") and plan.records[i].op == "add_dropout"


def test_a_plan_without_fusions_draws_no_cluster():
    plan = residual_plan(reuse=True)
    assert not plan.fusions
    source = draw_plan(plan).source
    assert_drawn(plan, source)
    assert "subgraph" not in source and "rule:" not in source and "dropout" in source


def test_the_picture_refuses_more_nodes_than_max_nodes():
    plan = residual_plan()
    with pytest.raises(ValueError, match="max_nodes"):
        draw_plan(plan, max_nodes=3)
    with pytest.raises(ValueError, match="rankdir"):
        draw_plan(plan, rankdir="up")


def test_a_transformer_step_fuses_every_residual_and_leaves_the_switches_as_they_were():
    """The boxes call fused ops themselves under the rules' switches: compiled_plan runs the boxes plain
    and the rules fuse. One encoder and one decoder layer: 3 attentions, 2 feed-forwards, 5 residuals."""
    from tinygrad_lite.nn import functional as F
    from transformer import Transformer

    tl.manual_seed(0)
    model = Transformer(12, 12, d_model=8, h=2, N=1, d_ff=16, dropout=0.1)
    ids = np.random.default_rng(0).integers(1, 12, size=(2, 5))
    before = [getattr(fast.TRICKS, name) for name in fast.NAMES]
    plan = compiled_plan(model, lambda s, ti, to: F.cross_entropy(model(s, ti).reshape(-1, 12), to.reshape(-1)),
                         (ids, ids[:, :-1], ids[:, 1:]))
    assert [getattr(fast.TRICKS, name) for name in fast.NAMES] == before
    assert [rule for rule, _ in plan.fusions.values()] == (["attention", "add_dropout", "linear_relu_dropout",
                                                            "add_dropout"] + ["attention", "add_dropout"] * 2
                                                           + ["linear_relu_dropout", "add_dropout"])
    assert_drawn(plan, draw_plan(plan, title="Transformer").source)


def run_viz(*args, env=None):
    return subprocess.run([sys.executable, "-m", "viz", *map(str, args)], cwd=REPO, env={**os.environ, **(env or {})},
                          check=False, capture_output=True, text=True, timeout=300)


@pytest.mark.cli
@pytest.mark.parametrize("command, fusions", [("transformer", {"add_dropout": 5, "attention": 3,
                                                                 "linear_relu_dropout": 2}),
                                               ("gpt", {"add_dropout": 2, "attention": 1})])
def test_the_cli_writes_the_plans_dot_source(tmp_path, command, fusions):
    """The GPT's MLP is GELU's: no linear_relu_dropout there."""
    out = tmp_path / "plan.dot"
    done = run_viz(command, "--compiled", "--layers", "1", "--out", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    nodes, clusters = parse(out.read_text(encoding="utf-8"))
    assert dict(Counter(clusters.values())) == {f"rule: {rule}": n for rule, n in fusions.items()}
    fused_ops = {"add_dropout": "add_dropout", "attention": "fused_attention",
                 "linear_relu_dropout": "linear_relu_dropout"}
    for rule, n in fusions.items():
        assert sum((label or "").split("\\n")[0] == fused_ops[rule] for label, _ in nodes.values()) == n


@pytest.mark.cli
def test_the_cli_draws_an_svg_with_the_rule_clusters(tmp_path, monkeypatch):
    monkeypatch.delenv(RENDERER_ENV, raising=False)
    if find_renderer() is None:
        pytest.skip("no Graphviz renderer installed (apt-get install graphviz or pip install graphviz-pure)")
    out = tmp_path / "plan.svg"
    done = run_viz("gpt", "--compiled", "--layers", "2", "--out", out)
    assert done.returncode == 0, done.stderr
    root = ET.parse(out).getroot()
    clusters = [g for g in root.iter(f"{SVG}g") if g.get("class") == "cluster"]
    texts = [" ".join(t.text or "" for t in g.iter(f"{SVG}text")) for g in clusters]
    assert sorted(texts) == ["rule: add_dropout"] * 4 + ["rule: attention"] * 2


@pytest.mark.cli
def test_fast_is_another_name_for_compiled(tmp_path):
    """--fast, "the step as training runs it", draws the same plan as --compiled: training compiles."""
    sources = []
    for flag in ("--compiled", "--fast"):
        out = tmp_path / f"{flag[2:]}.dot"
        done = run_viz("transformer", flag, "--layers", "1", "--out", out)
        assert done.returncode == 0, done.stderr
        sources.append(out.read_text(encoding="utf-8"))
    assert sources[0] == sources[1] and "rule: attention" in sources[0]


def test_a_padded_transformer_batch_shows_its_kept_rows_and_the_flat_optimizer():
    """Rule skip_padding's ops get a blue border and a caption line; the optimizer rule is named too."""
    from tinygrad_lite.nn import functional as F
    from transformer import Transformer
    from viz.plan import ROWS_COLOUR

    tl.manual_seed(0)
    model = Transformer(12, 12, d_model=8, h=2, N=1, d_ff=16, dropout=0.1)
    ids = np.random.default_rng(0).integers(1, 12, size=(3, 6))
    ids[1, 4:] = ids[2, 3:] = 0
    plan = compiled_plan(model, lambda s, ti, to: F.cross_entropy(model(s, ti).reshape(-1, 12), to.reshape(-1),
                                                                  ignore_index=0), (ids, ids[:, :-1], ids[:, 1:]))
    assert plan.rows and plan.call_rules == [("flat_optimizer", "Adam.step")]
    view = draw_plan(plan)
    assert_drawn(plan, view.source)
    blue = set()
    for line in view.source.splitlines():
        node = re.match(r"\s*(\w+) \[", line)
        if node and ROWS_COLOUR in line:
            blue.add(node.group(1))
    assert blue == {f"op{i}" for i in plan.rows}
    assert f"on the kept rows only (rule skip_padding): {len(plan.rows)} ops" in view.source
    assert "Adam.step rewritten by rule flat_optimizer" in view.source
    assert {"skip_padding", "flat_optimizer"} <= set(view.stats["rules"])
