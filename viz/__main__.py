"""python -m viz: draw backprop graphs and attention maps from the command line.

    python -m viz xor --out xor.svg                       scalar MLP on one XOR point, one training step
    python -m viz xor --points 4 --hidden 4 --out x.svg   the same on all four points (300 nodes: zoom in)
    python -m viz mlp --out mlp.svg                       tensor MLP (tinygrad_lite.nn.MLP), one step
    python -m viz transformer --depth 2 --out t.svg       a small Transformer's training step
    python -m viz gpt --depth 2 --out g.svg               a small GPT's training step (transformer.gpt)
    python -m viz transformer --compiled --out p.svg      the step as training runs it: the compiled plan (also gpt)
    python -m viz attention --checkpoint CKPT "这是一个苹果" --out attn.png   all three kinds, one figure
    python -m viz attention --checkpoint runs/gpt/best.safetensors "ROMEO:" --out a.png   a GPT's causal maps
    python -m viz lab --checkpoint CKPT                   the attention lab, served on 127.0.0.1
    python -m viz explore transformer --out t.html        step through the backward pass (or --checkpoint)
    python -m viz watch runs/translator                   a training run's live page (train --explore)

A training step's graph is recorded under tinygrad_lite.fast.plain(): the formula, one op at a
time (Q·Kᵀ, the masked softmax, ·V; relu; layer_norm), as the paper's boxes write it. Training runs
that program compiled: --compiled (or --fast) draws the plan tinygrad_lite.compiler captures of a whole
training step (viz/plan.py), each fused op, labelled with the formula it stands for
(viz.fast_ops.FAST_OPS), in a cluster named by the rewrite rule that made it.

Bad input (a missing file, an unknown format, a directory that can't be written) gives one
line on stderr and exit code 2; --debug shows the traceback instead.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from tinygrad_lite.checks import ACTIVATIONS, message_for_user
from tinygrad_lite.cli import OneLineParser, add_seed, common_flags, toy_kernels
from viz.attention_maps import write_attention, write_gpt_attention
from viz.explorer import cli as explorer_cli
from viz.lab import cli as lab_cli
from viz.plan import COMPILED_HELP, write_compiled
from viz.render import FORMATS, check_output_path
from viz.watch import cli as watch_cli

XOR_INPUTS = ((0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0))
XOR_TARGETS = (0.0, 1.0, 1.0, 0.0)
EXIT_BAD_INPUT = 2


def _depth(text: str):
    if text.lower() in ("none", "full", "all"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a module depth >= 0 or 'none', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a module depth >= 0 or 'none', got {value}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {value}")
    return value


def _sizes(text: str) -> list:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer widths such as 2,8,1, got {text!r}") \
            from None
    if len(sizes) < 2 or min(sizes) <= 0 or sizes[0] != 2 or sizes[-1] != 1:
        raise argparse.ArgumentTypeError(f"expected positive widths from 2 (XOR inputs) to 1 (the logit), "
                                         f"such as 2,8,1; got {text!r}")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m viz", description=__doc__.split("\n\n")[0])
    common = common_flags(parser, threads=False)
    commands = parser.add_subparsers(dest="command", required=True)

    def graph_command(name, help_text, rankdir):
        sub = commands.add_parser(name, parents=[common], help=help_text, description=help_text)
        if name in ("transformer", "gpt"):
            sub.add_argument("--compiled", "--fast", dest="compiled", action="store_true", help=COMPILED_HELP)
        sub.add_argument("--out", required=True, help="output file: .svg, .png, .pdf or .dot")
        sub.add_argument("--rankdir", default=rankdir, choices=("LR", "TB", "RL", "BT"))
        sub.add_argument("--max-nodes", type=_positive, default=2000)
        add_seed(sub, default=0)
        return sub

    xor = graph_command("xor", XOR_HELP, "TB")
    xor.add_argument("--hidden", type=_positive, default=2,
                     help="hidden neurons (MLP(2, [hidden, 1])); default 2, the fewest that can learn XOR")
    xor.add_argument("--points", type=int, choices=(1, 2, 3, 4), default=1,
                     help="how many of the 4 XOR examples the step uses; default 1, a picture readable at "
                          "100%% (about 50 nodes); each point adds a copy of the whole network "
                          "(--points 4 --hidden 4: about 300 nodes, to zoom into)")
    xor.add_argument("--act", default="tanh", choices=ACTIVATIONS)

    mlp = graph_command("mlp", "a tensor MLP's backprop graph after one training step on XOR", "LR")
    mlp.add_argument("--sizes", type=_sizes, default=[2, 8, 1], help="layer widths, e.g. 2,8,8,1")
    mlp.add_argument("--act", default="tanh", choices=ACTIVATIONS)
    mlp.add_argument("--depth", type=_depth, default=None, help="collapse modules at this depth")

    add_transformer_parser(graph_command)
    add_gpt_parser(graph_command)

    attn = commands.add_parser("attention", parents=[common], help="attention heatmaps of a trained translator or GPT",
                               description="attention heatmaps (layers x heads) of a translator or GPT checkpoint")
    attn.add_argument("sentence", help="the Chinese sentence to translate, e.g. 这是一个苹果; for a GPT, the text "
                                       "whose causal self-attention to draw, e.g. ROMEO:")
    attn.add_argument("--checkpoint", required=True,
                      help="translator checkpoint (python -m transformer train) or GPT checkpoint "
                           "(python -m transformer gpt train)")
    attn.add_argument("--out", required=True, help=ATTENTION_OUT_HELP)
    attn.add_argument("--kind", choices=("encoder", "decoder", "cross", "all"), default="all",
                      help="draw only this kind's section (default: all three)")
    lab_cli.add_parser(commands)
    explorer_cli.add_parser(commands, depth=_depth, positive=_positive, sizes=_sizes, activations=ACTIVATIONS)
    watch_cli.add_parser(commands)
    return parser


def add_transformer_parser(graph_command) -> None:
    """`viz transformer`: the flags of a small Transformer's training step."""
    tf = graph_command("transformer", "one training step of a small Transformer, modules as boxes", "TB")
    tf.add_argument("--depth", type=_depth, default=2,
                    help="collapse depth: 1 = embeddings/encoder/decoder, 2 = layers (default), "
                         "3 = attention/Add & Norm/FFN, none = every op")
    tf.add_argument("--expand", action="append", default=[], metavar="PATH",
                    help="open this module whatever the depth, e.g. encoder.layers.0 (repeatable)")
    tf.add_argument("--d-model", type=_positive, default=32)
    tf.add_argument("--layers", type=_positive, default=2, help="N, the number of encoder and decoder layers")
    tf.add_argument("--heads", type=_positive, default=4, help="h, the number of attention heads")
    tf.add_argument("--d-ff", type=_positive, default=None, help="feed-forward width (default 4 * d_model)")
    tf.add_argument("--vocab", type=_positive, default=20)
    tf.add_argument("--src-len", type=_positive, default=6)
    tf.add_argument("--tgt-len", type=_positive, default=5)
    tf.add_argument("--batch", type=_positive, default=2)


def add_gpt_parser(graph_command) -> None:
    """`viz gpt`: the flags of a small GPT's training step."""
    gpt = graph_command("gpt", "one training step of a small GPT (transformer.gpt), modules as boxes", "TB")
    gpt.add_argument("--depth", type=_depth, default=2,
                     help="collapse depth: 1 = embeddings/blocks/norm, 2 = each block (default), "
                          "3 = attention/Add & Norm/FFN, none = every op")
    gpt.add_argument("--expand", action="append", default=[], metavar="PATH",
                     help="open this module whatever the depth, e.g. blocks.0 (repeatable)")
    gpt.add_argument("--d-model", type=_positive, default=32, help="n_embd")
    gpt.add_argument("--layers", type=_positive, default=2, help="N (n_layer), the number of blocks")
    gpt.add_argument("--heads", type=_positive, default=4, help="h (n_head), the number of attention heads")
    gpt.add_argument("--vocab", type=_positive, default=20)
    gpt.add_argument("--length", type=_positive, default=6, help="T, tokens per sequence (block_size)")
    gpt.add_argument("--batch", type=_positive, default=2)


# ---------------------------------------------------------------- the subcommands
XOR_HELP = ("the scalar MLP's backprop graph, micrograd style, after one training step on XOR: by default one "
            "example, (1, 1) -> 0, through MLP(2, [2, 1]), drawn top to bottom")
XOR_ORDER = (3, 1, 2, 0)  # the examples --points takes, (1, 1) first: every weight then gets a gradient


def _render(graph, out: str) -> list:
    from viz import render

    return [render(graph, out)]


# ---------------------------------------------------------------- one training step each, shared by the
# graph commands and `explore`: (loss after backward, the model or None), every grad kept
def xor_step(args) -> tuple:
    """MLP(2, [hidden, 1]) on XOR: logits, mean binary cross-entropy log(1 + e^s) - t*s, backward."""
    from tinygrad_lite.scalar import MLP, Value

    model = MLP(2, [args.hidden, 1], act=args.act, seed=args.seed)
    for k, layer in enumerate(model.layers):
        for j, neuron in enumerate(layer.neurons):
            for i, w in enumerate(neuron.w):
                w.label = f"L{k}.n{j}.w{i}"
            neuron.b.label = f"L{k}.n{j}.b"
    losses = []
    examples = [(XOR_INPUTS[i], XOR_TARGETS[i]) for i in XOR_ORDER[:args.points]]
    for p, ((x0, x1), target) in enumerate(examples):
        x = [Value(x0, label=f"x{p}[0]"), Value(x1, label=f"x{p}[1]")]
        logit = model(x)
        logit.label = f"logit{p}"
        losses.append((1 + logit.exp()).log() - target * logit)
    loss = sum(losses[1:], losses[0]) / len(losses)
    loss.label = "loss"
    model.zero_grad()
    loss.backward()
    return loss, None


def _recording():
    """Where a graph is recorded: fast.plain(), the formula, one op at a time."""
    from tinygrad_lite import fast

    return fast.plain()


def mlp_step(args) -> tuple:
    """tinygrad_lite.nn.MLP on the XOR batch: BCE-with-logits loss, backward keeping every grad
    (and the graph, so `explore` can ask each op what it sent each input)."""
    import numpy as np

    from tinygrad_lite import Tensor, manual_seed, retain_grads
    from tinygrad_lite.nn import MLP
    from tinygrad_lite.nn import functional as F

    manual_seed(args.seed)
    model = MLP(args.sizes, act=args.act)
    x = Tensor(np.array(XOR_INPUTS, dtype=np.float32), name="x (XOR inputs)")
    target = Tensor(np.array(XOR_TARGETS, dtype=np.float32)[:, None], name="target")
    with _recording(), retain_grads():
        loss = F.binary_cross_entropy_with_logits(model(x), target)
        loss.backward(retain_graph=True)
    return loss, model


def transformer_step(args) -> tuple:
    """Transformer(vocab, vocab, d_model, h, N, d_ff) on a random batch: cross-entropy, backward."""
    from tinygrad_lite import retain_grads

    model, loss, batch = transformer_parts(args)
    with _recording(), retain_grads():
        value = loss(*batch)
        value.backward(retain_graph=True)
    return value, model


def transformer_parts(args) -> tuple:
    """(model, loss(src, tgt_in, tgt_out), a random batch) of `viz transformer`."""
    import numpy as np

    from tinygrad_lite import manual_seed
    from tinygrad_lite.nn import functional as F
    from transformer import Transformer

    if args.d_model % args.heads:
        raise ValueError(f"transformer: --d-model {args.d_model} must be divisible by --heads {args.heads} "
                         "(d_k = d_model / h)")
    if args.vocab < 3:
        raise ValueError(f"transformer: --vocab must be at least 3 (padding plus two tokens), got {args.vocab}")
    manual_seed(args.seed)
    model = Transformer(args.vocab, args.vocab, d_model=args.d_model, h=args.heads, N=args.layers,
                        d_ff=args.d_ff or 4 * args.d_model, dropout=0.1)
    rng = np.random.default_rng(args.seed)
    src = _padded(rng.integers(1, args.vocab, size=(args.batch, args.src_len)), rng)
    tgt = _padded(rng.integers(1, args.vocab, size=(args.batch, args.tgt_len + 1)), rng)

    def loss(src, tgt_in, tgt_out):
        return F.cross_entropy(model(src, tgt_in).reshape(-1, args.vocab), tgt_out.reshape(-1), ignore_index=0)
    return model, loss, (src, tgt[:, :-1], tgt[:, 1:])


def _padded(ids, rng):
    """ids with each row after the first cut to a random length of at least half, <pad> (0) after it, as a
    batch of sentences is (the compiled plan then shows rule skip_padding at work)."""
    width = ids.shape[1]
    for row in ids[1:]:
        row[rng.integers((width + 1) // 2, width + 1):] = 0
    return ids


def gpt_step(args) -> tuple:
    """transformer.gpt.GPT (no bias, as nanoGPT) on random ids: next-token cross-entropy, backward."""
    from tinygrad_lite import retain_grads

    model, batch = gpt_parts(args)
    with _recording(), retain_grads():
        loss = model.loss(*batch)
        loss.backward(retain_graph=True)
    return loss, model


def gpt_parts(args, dropout: float = 0.0) -> tuple:
    """(model, (ids, next ids)) of `viz gpt`: random ids, block_size long."""
    import numpy as np

    from tinygrad_lite import manual_seed
    from transformer.gpt import GPT, GPTConfig

    manual_seed(args.seed)
    model = GPT(GPTConfig(vocab_size=args.vocab, block_size=args.length, n_layer=args.layers,
                          n_head=args.heads, n_embd=args.d_model, dropout=dropout))
    ids = np.random.default_rng(args.seed).integers(0, args.vocab, size=(args.batch, args.length + 1))
    return model, (ids[:, :-1], ids[:, 1:])


def translator_step(args) -> tuple:
    """One teacher-forced training step of a trained translator on a pair of its own corpus (the
    built-in one, or the file it was trained on), recorded under fast.plain(), with the label
    smoothing it trained with: (loss, model, label_smoothing)."""
    import numpy as np

    from tinygrad_lite import fast, manual_seed, retain_grads
    from transformer.data import builtin_corpus, tokenize_en
    from transformer.train import teacher_forcing_loss
    from transformer.train_data import read_pairs
    from transformer.translator import Translator

    translator, meta, _ = Translator.load(args.checkpoint, with_state=True)
    recipe = (meta.get("train") or {}).get("train_config") or {}
    pairs = read_pairs(recipe["data"]).pairs if recipe.get("data") else builtin_corpus()["train"]
    zh, en = pairs[args.seed % len(pairs)]
    src = translator.source_ids(zh, warn=False)[None, :]
    tgt = translator.tgt_vocab.encode(tokenize_en(en, lowercase=translator.lowercase), add_bos=True, add_eos=True)
    tgt = np.asarray(tgt, dtype=np.int64)[None, :]
    manual_seed(args.seed)
    translator.model.train()
    label_smoothing = recipe.get("label_smoothing", 0.0)
    with toy_kernels(), fast.plain(), retain_grads():
        loss = teacher_forcing_loss(translator.model, src, tgt[:, :-1], tgt[:, 1:], label_smoothing)
        loss.backward(retain_graph=True)
    loss.name = f"loss on {zh} → {en}"
    return loss, translator.model, label_smoothing


def gpt_checkpoint_step(model, metadata: dict, args) -> tuple:
    """One training step of a trained GPT on a window of the text it learned (the file it was trained
    on if it is still there, else the built-in text): block_size tokens from a position the seed picks."""
    import numpy as np

    from tinygrad_lite import fast, manual_seed, retain_grads
    from transformer.gpt.text import builtin_text
    from transformer.gpt.tokenizers import tokenizer_from_dict

    tokenizer = tokenizer_from_dict(metadata["tokenizer"])
    source = ((metadata.get("train_config") or {}).get("data")) or None
    text = Path(source).read_text(encoding="utf-8") if source and Path(source).is_file() else builtin_text()
    T = model.config.block_size
    start = np.random.default_rng(args.seed).integers(0, max(len(text) - 4 * T, 1))
    ids = tokenizer.encode(text[start:start + 4 * T])[:T + 1][None, :]
    manual_seed(args.seed)
    model.train()
    with toy_kernels(), fast.plain(), retain_grads():
        loss = model.loss(ids[:, :-1], ids[:, 1:])
        loss.backward(retain_graph=True)
    loss.name = f"loss on {tokenizer.decode(ids[0, :24].tolist())!r}…"
    return loss, model


def run_xor(args) -> list:
    from viz import draw_graph

    loss, _ = xor_step(args)
    return _render(draw_graph(loss, rankdir=args.rankdir, max_nodes=args.max_nodes), args.out)


def run_mlp(args) -> list:
    from viz import draw_graph

    loss, model = mlp_step(args)
    graph = draw_graph(loss, model=model, collapse=args.depth, rankdir=args.rankdir, max_nodes=args.max_nodes)
    return _render(graph, args.out)


def run_transformer(args) -> list:
    from viz import draw_graph

    if args.compiled:
        return [write_compiled(args, "Transformer", *transformer_parts(args))]
    loss, model = transformer_step(args)
    graph = draw_graph(loss, model=model, collapse=args.depth, expand=args.expand, rankdir=args.rankdir,
                       max_nodes=args.max_nodes)
    return _render(graph, args.out)


def run_gpt(args) -> list:
    from viz import draw_graph

    if args.compiled:
        model, batch = gpt_parts(args, dropout=0.1)
        return [write_compiled(args, "GPT", model, model.loss, batch)]
    loss, model = gpt_step(args)
    graph = draw_graph(loss, model=model, collapse=args.depth, expand=args.expand, rankdir=args.rankdir,
                       max_nodes=args.max_nodes)
    return _render(graph, args.out)


STEPS = {"xor": xor_step, "mlp": mlp_step, "transformer": transformer_step, "gpt": gpt_step}


def run_explore(args) -> list:
    """The backward stepper's page (viz/explorer) for one step: a toy model's or a checkpoint's (translator or GPT)."""
    explorer_cli.check(args)
    if not args.checkpoint:
        return [explorer_cli.write(*STEPS[args.model](args), args)]
    gpt = _gpt_checkpoint(args.checkpoint, with_metadata=True)
    if gpt:
        return [explorer_cli.write(*gpt_checkpoint_step(*gpt, args), args, kind="GPT")]
    loss, model, label_smoothing = translator_step(args)
    return [explorer_cli.write(loss, model, args, kind="translator", label_smoothing=label_smoothing)]


ATTENTION_OUT_HELP = ("one image (.png, .svg or .pdf) with a section per kind: encoder self-attention, "
                      "decoder self-attention, cross-attention; each a grid of layers x heads")


def run_attention(args) -> list:
    """Heatmaps of the translator's attention while it translates `sentence` greedily."""
    if Path(args.checkpoint).is_dir():
        raise IsADirectoryError(f"attention: checkpoint {args.checkpoint!r} is a directory; expected a file")
    if not Path(args.checkpoint).is_file():
        raise FileNotFoundError(f"attention: checkpoint {args.checkpoint!r} does not exist")
    gpt = _gpt_checkpoint(args.checkpoint)
    if gpt is not None:
        return [write_gpt_attention(*gpt, args.sentence, args.out)]
    try:
        from transformer.translator import load_translator
    except ImportError as exc:
        raise RuntimeError(f"attention: the translator is not available ({exc})") from exc

    translator = load_translator(args.checkpoint)
    kinds = None if args.kind == "all" else [args.kind]
    return [write_attention(translator, args.sentence, args.out, kinds)]


def _gpt_checkpoint(path, with_metadata: bool = False) -> tuple | None:
    """(model, tokenizer), or (model, metadata), if `path` is a GPT checkpoint (transformer.gpt), else None."""
    from tinygrad_lite.checkpoint import CheckpointError
    from transformer.gpt import GPT
    from transformer.gpt.tokenizers import tokenizer_from_dict

    try:
        model, metadata = GPT.load(path)
    except CheckpointError:
        return None
    if "tokenizer" not in metadata:
        raise ValueError(f"GPT checkpoint {str(path)!r} has no tokenizer in its metadata")
    return (model, metadata) if with_metadata else (model, tokenizer_from_dict(metadata["tokenizer"]))


def run_lab(args) -> list:
    """The attention lab: transformer.lab.translate_with_mask, served by viz/lab (viz/lab/cli.py)."""
    from transformer.lab import translate_with_mask
    from transformer.translator import load_translator

    lab_cli.check_args(args)
    translator = load_translator(args.checkpoint)
    return lab_cli.run(args, lambda text, mask: translate_with_mask(translator, text, mask, beam=args.beam))


COMMANDS = {"xor": run_xor, "mlp": run_mlp, "transformer": run_transformer, "gpt": run_gpt, "attention": run_attention,
            "lab": run_lab, "explore": run_explore, "watch": watch_cli.run}
IMAGE_FORMATS = {"attention": ("png", "svg", "pdf"), "explore": ("html",)}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if hasattr(args, "out"):
                check_output_path(args.out, formats=IMAGE_FORMATS.get(args.command, FORMATS), op="--out")
            written = COMMANDS[args.command](args)
        warned = (message_for_user(w.message) for w in caught if issubclass(w.category, UserWarning))
        for message in dict.fromkeys(warned):
            print(f"viz {args.command}: warning: {message}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line for the user; --debug for the traceback
        if args.debug:
            raise
        print(f"viz {args.command}: error: {message_for_user(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
