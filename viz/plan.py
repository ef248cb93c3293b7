"""A picture of what the step compiler did: a compiled step's plan, one node per op, each fused op in a
cluster named by its rule around the plain ops it replaced, as tinygrad's VIZ shows its rewrites.

`compiled_plan(model, loss, batch)` compiles one training step (loss, backward, an Adam step) with
tinygrad_lite.compiler, runs it once and returns its Plan. `draw_plan(plan)` draws the plan's op records
(rules.Record: name, producers, shape): an edge from each op's producers, a dot for each leaf or input
(a parameter, a constant, the step's token ids), and for each fusion a cluster "rule: <name>" holding
the fused op and, dashed and grey, the plain ops it stands for. An op that rule skip_padding runs on a
padded batch's kept rows only has a blue border. The records are the forward ops; the backward calls,
gradient sums and the optimizer's recorded step (rule flat_optimizer's, if it rewrote it: the caption
says) follow them in the plan's program.
"""
from __future__ import annotations

from collections import Counter

import graphviz

from tinygrad_lite.checks import positive_int

from .graph_style import FONT, escape_plain, shape_text
from .scene import GraphView

FUSED_FILL = "#fff3c4"
CLUSTER_COLOUR = "#c77700"
GHOST_COLOUR = "#9e9e9e"
ROWS_COLOUR = "#1565c0"
RANKDIRS = ("LR", "TB", "RL", "BT")
COMPILED_HELP = ("draw the step as training runs it (--fast: the same): the plan of one compiled training step "
                 "(loss, backward, Adam; tinygrad_lite.compiler) instead of the formula's graph, recorded under "
                 "fast.plain() one op at a time: each op with its output shape, each fused op in a cluster named "
                 "by its rewrite rule around the plain ops it replaced (dropout 0.1, so Add & Norm's x + dropout(s) "
                 "is there to fuse). --depth and --expand do not apply")


def compiled_plan(model, loss, batch: tuple, lr: float = 1e-3):
    """The Plan of one compiled training step of `model`: loss(*batch), backward, Adam, run once.

    Every speed trick is off but the rules' switches, and the kernels are the NumPy twins (as for a
    toy model's picture), so the rules see the paper's boxes as plain ops and fuse them."""
    from tinygrad_lite import fast
    from tinygrad_lite.cli import toy_kernels
    from tinygrad_lite.compiler import compile
    from tinygrad_lite.compiler.rules import SWITCHES
    from tinygrad_lite.optim import Adam

    optimizer = Adam(model.parameters(), lr=lr)

    def step(*inputs):
        value = loss(*inputs)
        optimizer.zero_grad()
        value.backward()
        optimizer.step()
        return value

    others = [name for name in fast.NAMES if name not in SWITCHES]
    with toy_kernels(), fast.tricks_off(*others), fast.tricks_on(*SWITCHES):
        compiled = compile(step)
        compiled(*batch)
    return next(iter(compiled.plans.values()))


def draw_plan(plan, *, title: str = "", rankdir: str = "TB", max_nodes: int = 2000,
              fmt: str | None = None) -> GraphView:
    """Draw `plan` (a compiler Plan, or anything with its `.records` and `.fusions`) as a GraphView.

    Node `op<i>` is op i of the plan (records[i]); `op<i>_was<k>` the k-th plain op that fusion i
    replaced; `leaf<i>_<slot>` the leaf or input op i reads in that argument slot."""
    if rankdir not in RANKDIRS:
        raise ValueError(f"draw_plan: rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    positive_int("draw_plan", "max_nodes", max_nodes)
    records, fusions = list(plan.records), dict(plan.fusions)
    rows, calls = frozenset(getattr(plan, "rows", ())), list(getattr(plan, "call_rules", ()))
    ops = [i for i, r in enumerate(records) if r is not None]
    leaves = sum(p is None for i in ops for p in records[i].parents)
    count = len(ops) + leaves + sum(len(replaced) for _, replaced in fusions.values())
    if count > max_nodes:
        raise ValueError(f"draw_plan: the plan has {count:,} nodes, more than max_nodes={max_nodes:,}; "
                         "draw a smaller model or pass a higher max_nodes")
    graph = _empty_graph(rankdir, fmt, len(ops), fusions, count, rows, calls)
    graph.attr(label=_caption(title, len(ops), fusions, rows, calls))
    for i in ops:
        if i in fusions:
            graph.subgraph(_fusion_cluster(i, records[i], *fusions[i], on_rows=i in rows))
        else:
            graph.node(f"op{i}", label=_label(records[i]), **_rows_style(i in rows))
    for i in ops:
        for slot, j in enumerate(records[i].parents):
            if j is None:
                graph.node(f"leaf{i}_{slot}", label="", shape="point", width="0.08", color=GHOST_COLOUR)
                graph.edge(f"leaf{i}_{slot}", f"op{i}", color=GHOST_COLOUR)
            else:
                graph.edge(f"op{j}", f"op{i}")
    return graph


def _label(record) -> str:
    return f"{escape_plain(record.op)}\\n{shape_text(record.shape)}"


def _rows_style(on_rows: bool) -> dict:
    return {"color": ROWS_COLOUR, "penwidth": "2"} if on_rows else {}


def _fusion_cluster(index: int, record, rule: str, replaced: tuple, on_rows: bool = False) -> graphviz.Digraph:
    """The cluster of fusion `index`: the fused op, bold, and the plain ops it replaced, dashed and grey,
    in the order they ran, each feeding the next and the last the fused op."""
    cluster = graphviz.Digraph(name=f"cluster_rule{index}",
                               graph_attr={"label": f"rule: {escape_plain(rule)}", "style": "rounded,filled",
                                           "fillcolor": "#fffbea", "color": CLUSTER_COLOUR,
                                           "fontcolor": CLUSTER_COLOUR, "fontsize": "11", "labeljust": "l",
                                           "labelloc": "t"})
    ghosts = [f"op{index}_was{k}" for k in range(len(replaced))]
    for key, name in zip(ghosts, replaced):
        cluster.node(key, label=escape_plain(name), style="rounded,dashed", color=GHOST_COLOUR, fontcolor=GHOST_COLOUR)
    for a, b in zip(ghosts, ghosts[1:]):
        cluster.edge(a, b, style="dashed", color=GHOST_COLOUR)
    cluster.node(f"op{index}", label=_label(record), style="rounded,filled,bold", fillcolor=FUSED_FILL,
                 **({"color": CLUSTER_COLOUR} | _rows_style(on_rows)))
    if ghosts:
        cluster.edge(ghosts[-1], f"op{index}", style="dashed", color=GHOST_COLOUR, label=" fused",
                     fontcolor=GHOST_COLOUR, fontsize="9")
    return cluster


def _empty_graph(rankdir: str, fmt: str | None, ops: int, fusions: dict, nodes: int, rows=frozenset(),
                 calls=()) -> GraphView:
    return GraphView(name="compiled_plan", format=fmt or "svg", engine="dot",
                     graph_attr={"rankdir": rankdir, "fontname": FONT, "fontsize": "11", "newrank": "true",
                                 "labelloc": "b", "labeljust": "l"},
                     node_attr={"fontname": FONT, "fontsize": "11", "shape": "box", "style": "rounded"},
                     edge_attr={"fontname": FONT, "arrowsize": "0.7"},
                     stats={"nodes": nodes, "ops": ops, "fusions": len(fusions), "on_rows": len(rows),
                            "rules": sorted({rule for rule, _ in fusions.values()}
                                            | ({"skip_padding"} if rows else set()) | {rule for rule, _ in calls})})


def _caption(title: str, ops: int, fusions: dict, rows=frozenset(), calls=()) -> str:
    """What the picture shows, in a few lines."""
    by_rule = Counter(rule for rule, _ in fusions.values())
    fused = ", ".join(f"{rule} x{n}" for rule, n in sorted(by_rule.items())) or "none"
    lines = [title] if title else []
    lines.append(f"the compiled plan's forward ops: {ops} ops; fused by rewrite rules: {fused}"
                 + (f"; on the kept rows only (rule skip_padding): {len(rows)} ops" if rows else ""))
    if calls:
        lines.append("after the backward: " + ", ".join(f"{what} rewritten by rule {rule}" for rule, what in calls))
    lines.append("box: an op and its output shape   dot: a leaf or an input"
                 + ("   cluster: a rule's fused op, with the plain ops it replaced (dashed)" if fusions else "")
                 + ("   blue border: run on the padded batch's kept rows" if rows else ""))
    return "\\l".join(escape_plain(line) for line in lines) + "\\l"


def write_compiled(args, name: str, model, loss, batch: tuple):
    """`python -m viz transformer|gpt --compiled`: draw the plan of one compiled step to args.out."""
    from .graph import render

    plan = compiled_plan(model, loss, batch)
    return render(draw_plan(plan, title=f"{name}: one compiled training step", rankdir=args.rankdir,
                            max_nodes=args.max_nodes), args.out)
