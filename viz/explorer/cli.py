"""`python -m viz explore`: the backward stepper's page for one training step.

    python -m viz explore xor --out xor.html            the scalar MLP on XOR
    python -m viz explore mlp --out mlp.html            a tensor MLP on XOR
    python -m viz explore transformer --out t.html      a small Transformer (1 layer, d_model 16)
    python -m viz explore gpt --out g.html              a small GPT (1 block, n_embd 16)
    python -m viz explore --checkpoint runs/translator/best.safetensors --out t.html
    python -m viz explore --checkpoint runs/gpt/best.safetensors --out g.html

viz/__main__.py builds the step (the same builders as the graph commands, recorded under
fast.plain()); this module holds the options and writes the page.
"""
from __future__ import annotations

import argparse

from .rules import cross_entropy_rule
from .views import MAX_VIEWS

MODELS = ("xor", "mlp", "transformer", "gpt")


def add_parser(commands, *, depth, positive, sizes, activations):
    """The `explore` subcommand; the type checkers are the CLI's own (depth, positive ints, widths)."""
    sub = commands.add_parser("explore", help="an offline page that steps through the backward pass",
                              description="write one self-contained HTML page that walks a training step's "
                                          "backward pass node by node (arrow keys), with each op's local "
                                          "rule and the gradients the engine computed")
    sub.add_argument("model", nargs="?", choices=MODELS, help="which step to record (or --checkpoint)")
    sub.add_argument("--checkpoint", help="a translator checkpoint: one training step on a pair of its corpus; "
                                          "a GPT checkpoint: one step on a window of its text")
    sub.add_argument("--out", required=True, help="the page to write (.html)")
    sub.add_argument("--depth", type=depth, default=argparse.SUPPRESS,
                     help="fold modules deeper than this into boxes (default: 2 for a Transformer, none "
                          "for the MLP); click a box in the page to open it")
    sub.add_argument("--expand", action="append", default=[], metavar="PATH", help="open this module too")
    sub.add_argument("--rankdir", choices=("LR", "TB", "RL", "BT"), default=None)
    sub.add_argument("--max-nodes", type=positive, default=2000)
    sub.add_argument("--max-views", type=positive, default=MAX_VIEWS,
                     help=f"module states (which boxes are open) laid out ahead for clicks and steps "
                          f"(default: {MAX_VIEWS}); more opens more boxes in a bigger page")
    sub.add_argument("--seed", type=int, default=0)
    sub.add_argument("--hidden", type=positive, default=2, help="xor: hidden neurons")
    sub.add_argument("--points", type=int, choices=(1, 2, 3, 4), default=2, help="xor: examples in the step")
    sub.add_argument("--act", default="tanh", choices=activations, help="xor, mlp: the activation")
    sub.add_argument("--sizes", type=sizes, default=[2, 4, 1], help="mlp: layer widths")
    sub.add_argument("--d-model", type=positive, default=16, help="transformer: d_model; gpt: n_embd")
    sub.add_argument("--layers", type=positive, default=1, help="transformer: N; gpt: n_layer")
    sub.add_argument("--heads", type=positive, default=2, help="transformer, gpt: h")
    sub.add_argument("--d-ff", type=positive, default=32, help="transformer: feed-forward width")
    sub.add_argument("--vocab", type=positive, default=10, help="transformer, gpt: vocabulary size")
    sub.add_argument("--length", type=positive, default=4, help="gpt: T, tokens per sequence")
    sub.add_argument("--src-len", type=positive, default=4)
    sub.add_argument("--tgt-len", type=positive, default=3)
    sub.add_argument("--batch", type=positive, default=1)
    sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return sub


def check(args) -> None:
    """Exactly one of a model name and --checkpoint."""
    if (args.model is None) == (args.checkpoint is None):
        raise ValueError("explore: name one step to record, xor, mlp, transformer or gpt, or give --checkpoint "
                         f"(got {'both' if args.model else 'neither'})")
    if not hasattr(args, "depth"):
        args.depth = None if args.model in ("xor", "mlp") else 2
    if args.model == "xor" and (args.depth is not None or args.expand):
        raise ValueError("explore: --depth and --expand fold modules; the scalar xor step has none")


def write(loss, model, args, kind: str | None = None, label_smoothing: float = 0.0) -> str:
    """The page for the step's `loss`, written to args.out; returns the path. `kind` names a
    checkpoint's model ("translator", "GPT") in the title; a `label_smoothing` above 0 (the
    translator's recipe) is in the cross-entropy rule."""
    from viz.explorer import explore

    what = args.model or f"the {kind or 'model'} {args.checkpoint}"
    rules = {"cross_entropy": cross_entropy_rule(label_smoothing)} if label_smoothing else None
    page = explore(loss, model, depth=args.depth, expand=args.expand, rankdir=args.rankdir,
                   max_nodes=args.max_nodes, max_views=args.max_views, title=f"backward, step by step: {what}",
                   rules=rules)
    return str(page.save(args.out))
