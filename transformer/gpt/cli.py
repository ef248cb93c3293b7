"""The GPT's commands, `python -m transformer gpt {train, sample, eval}`: a GPT from the same blocks, trained,
sampled and scored as nanoGPT.

Flags take nanoGPT's names, spelt with dashes (--n-layer 4) or as nanoGPT writes them (--n_layer=4).
A subcommand is a function add_<name>_parser(sub, common) that sets `run` to its cmd_<name>. The
loss plot and the live page (--explore) are viz's, which the CLI hands in (`load_plots`,
`load_watch`): transformer never imports viz.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
from dataclasses import fields

from tinygrad_lite import cli as toolkit
from tinygrad_lite.checks import message_for_user
from transformer.kernel_cache import compiling_notice
from transformer.progress import ProgressBar

from .training import GPTTrainConfig

DEFAULTS = {f.name: f.default for f in fields(GPTTrainConfig)}
RUN_FILES = ("checkpoint.safetensors", "best.safetensors", "metrics.jsonl", "loss.png", "events.jsonl")


def default_checkpoint(out: str = DEFAULTS["out"]) -> str:
    """The best model on val of the default run, else its latest checkpoint."""
    best, latest = os.path.join(out, RUN_FILES[1]), os.path.join(out, RUN_FILES[0])
    return best if os.path.exists(best) or not os.path.exists(latest) else latest


DESCRIPTION = "a GPT from the same blocks, trained, sampled and scored as nanoGPT"


def add_commands(parser, common, load_plots, load_watch) -> None:
    """train, eval and sample under `parser` (python -m transformer gpt); `common` is the parent parser
    of the global flags, `load_plots` returns viz.plots (for OUT/loss.png), `load_watch` viz.watch (the
    live page of --explore)."""
    sub = parser.add_subparsers(dest="gpt_command", metavar="command", required=True)
    add_train_parser(sub, common, load_plots, load_watch)
    add_eval_parser(sub, common)
    add_sample_parser(sub, common)


def config_flag(parser, name: str, help: str, shown=None, group=None, **kwargs) -> None:
    """--name-with-dashes on `parser` (in its argument `group`, if given) for GPTTrainConfig's field
    `name`; its default (shown) stays in GPTTrainConfig."""
    default, flag = DEFAULTS[name], "--" + name.replace("_", "-")
    if shown is None:
        shown = f"{default:,}" if isinstance(default, int) and default > 9999 else default
    (group or parser).add_argument(flag, dest=name, default=None, help=f"{help} (default {shown})", **kwargs)


def add_train_parser(sub, common, load_plots, load_watch) -> None:
    t = sub.add_parser("train", parents=[common], help="train a GPT (on the built-in text by default)",
                       description="Train a GPT as nanoGPT's train.py does. Without --data it learns the built-in "
                                   "text: the project's own docstrings and docs (transformer.gpt.text).",
                       epilog="nanoGPT's spellings work too: --n_layer=4, --bias=False.")
    t.set_defaults(run=cmd_train, load_plots=load_plots, load_watch=load_watch)
    t.add_argument("--data", help="a UTF-8 text file to learn; the first 90%% trains, the last 10%% validates "
                                  "(default: the built-in text)")
    t.add_argument("--val", help="a validation text file; then all of --data trains")
    toolkit.add_run_flags(t, DEFAULTS["out"], held="its checkpoints, metrics and loss.png")
    toolkit.add_minutes(t, f"{DEFAULTS['minutes']:g}")
    toolkit.add_seed(t, f"seed of the initial weights, the batches and dropout (default {DEFAULTS['seed']})")
    config_flag(t, "tokenizer", "one token a character, or byte-level BPE", choices=["char", "bpe"])
    config_flag(t, "vocab_size", "the bpe tokenizer's vocabulary size, >= 256", shown="1024 for bpe",
                type=toolkit.positive_int)
    t.add_argument("--no-progress", action="store_true", help="no progress bar; evaluation lines only")
    toolkit.add_explore(t, "curves, gradient norms by module, probe prompts continued and their self-attention")
    add_model_flags(t)
    add_optimisation_flags(t)


def add_model_flags(t) -> None:
    m = t.add_argument_group("the model (nanoGPT's names)")
    config_flag(t, "n_layer", "blocks (the paper's N)", type=toolkit.positive_int, group=m)
    config_flag(t, "n_head", "attention heads per block (h)", type=toolkit.positive_int, group=m)
    config_flag(t, "n_embd", "width of the residual stream (d_model)", type=toolkit.positive_int, group=m)
    config_flag(t, "block_size", "context length: the most tokens one forward sees", type=toolkit.positive_int, group=m)
    config_flag(t, "dropout", "dropout rate, P_drop", type=toolkit.non_negative_float, group=m)
    config_flag(t, "bias", "biases in the Linear and LayerNorm layers", action=argparse.BooleanOptionalAction,
                group=m)


def add_optimisation_flags(t) -> None:
    o = t.add_argument_group("the optimisation (nanoGPT's names)")
    config_flag(t, "batch_size", "windows a batch", type=toolkit.positive_int, group=o)
    config_flag(t, "max_iters", "iterations at most", type=toolkit.positive_int, group=o)
    config_flag(t, "optimizer", "muon: Muon for the blocks' matrices and AdamW for the rest; adamw: AdamW for all "
                "(nanoGPT's)", choices=["muon", "adamw"], group=o)
    config_flag(t, "learning_rate", "the peak learning rate (AdamW's)", type=toolkit.positive_float, group=o)
    config_flag(t, "muon_lr", "Muon's peak learning rate, on the same schedule", type=toolkit.positive_float, group=o)
    config_flag(t, "decay_lr", "warmup then cosine decay; off: a constant --learning-rate",
                action=argparse.BooleanOptionalAction, group=o)
    config_flag(t, "warmup_iters", "iterations of linear warmup", type=toolkit.non_negative_int, group=o)
    config_flag(t, "lr_decay_iters", "the cosine reaches --min-lr here (nanoGPT: about --max-iters)",
                shown="the run's end: when the --minutes budget is spent, or at --max-iters if untimed",
                type=toolkit.positive_int, group=o)
    config_flag(t, "min_lr", "the learning rate after the decay", type=toolkit.non_negative_float, group=o)
    config_flag(t, "weight_decay", "decoupled weight decay, on the matrices", type=toolkit.non_negative_float,
                group=o)
    config_flag(t, "beta1", "AdamW's beta1", type=toolkit.non_negative_float, group=o)
    config_flag(t, "beta2", "AdamW's beta2", type=toolkit.non_negative_float, group=o)
    config_flag(t, "grad_clip", "clip the gradient's norm at this; 0: off", type=toolkit.non_negative_float, group=o)
    toolkit.add_compile(o)
    config_flag(t, "eval_interval", "estimate the train and val loss every N iterations", type=toolkit.positive_int,
                group=o)
    config_flag(t, "eval_iters", "batches per split in each estimate", type=toolkit.positive_int, group=o)
    config_flag(t, "average", "at the end, also try the mean of the weights at the last N evaluations "
                "(checkpoint averaging, the paper's 6.1): the best model if its val loss is lower",
                shown="0: off", type=toolkit.non_negative_int, group=o)


def add_eval_parser(sub, common) -> None:
    e = sub.add_parser("eval", parents=[common], help="the loss over a whole validation split",
                       description="The mean loss over every token of a validation split, with perplexity and "
                                   "bits per character. The last line reads 'val loss <number> ...'.")
    e.set_defaults(run=cmd_eval)
    e.add_argument("--checkpoint", help=f"a GPT checkpoint (default {default_checkpoint()})")
    source = e.add_mutually_exclusive_group()
    source.add_argument("--data", help="score the last 10%% of this text file (default: of the text the "
                                       "checkpoint was trained on, if it recorded it, else the built-in text)")
    source.add_argument("--val", help="score all of this text file")


# ---------------------------------------------------------------- train
def nanogpt_spelling(argv: list, flags: set) -> list:
    """nanoGPT's --n_layer=4 as --n-layer=4, and its --bias=False / --bias=True as --no-bias / --bias."""
    out = []
    for arg in argv:
        flag, eq, value = arg.partition("=")
        dashed = flag[:2] + flag[2:].replace("_", "-")
        if arg.startswith("--") and dashed in flags:
            if value in ("True", "False") and f"--no-{dashed[2:]}" in flags:
                arg = dashed if value == "True" else f"--no-{dashed[2:]}"
            else:
                arg = dashed + eq + value
        out.append(arg)
    return out


def config_overrides(args) -> dict:
    """The GPTTrainConfig fields set on the command line."""
    overrides = {f.name: getattr(args, f.name) for f in fields(GPTTrainConfig)
                 if f.name not in ("out", "resume", "threads") and getattr(args, f.name, None) is not None}
    if "minutes" in overrides:
        overrides["minutes"] = toolkit.minutes_limit(overrides["minutes"])
    overrides["compile"] = toolkit.compile_chosen(args)
    return overrides


def with_flag_names(message: str) -> str:
    """GPTTrainConfig's words in the CLI's: 'GPTTrainConfig: lr_decay_iters' -> 'gpt train: --lr-decay-iters'."""
    names = "|".join(f.name for f in fields(GPTTrainConfig) if "_" in f.name)
    message = re.sub(rf"\b({names})\b", lambda m: "--" + m.group(1).replace("_", "-"), message)
    return message.replace("GPTTrainConfig:", "gpt train:")


def check_run_arguments(args) -> None:
    """A run already in --out is continued (--resume) or replaced (--overwrite), never overwritten unasked."""
    for path, what in ((args.data, "data file"), (args.val, "validation file")):
        if path:
            toolkit.check_input_file(path, what)
    toolkit.check_run_flags(args, RUN_FILES, "gpt train")


class IterationBar(ProgressBar):
    """transformer.progress's bar over the run's budget, counting iterations."""

    def step(self, trainer, loss: float, tokens_per_s: float) -> None:
        bar = self.open(trainer.budget.origin())
        bar.set_description_str(f"iter {trainer.iter}", refresh=False)
        bar.set_postfix_str(f"loss {loss:.3f}, {tokens_per_s:,.0f} tok/s, lr {trainer.lr:.2e}", refresh=False)
        bar.update(min(100.0, 100.0 * trainer.budget_spent()) - bar.n)
        bar.refresh()


def cmd_train(args) -> int:
    from tinygrad_lite import distributed as dist
    from transformer.plugins.report import TrainingReport

    from .training import GPTTrainer, Interrupted, resume_config
    check_run_arguments(args)
    overrides = config_overrides(args)
    try:
        cfg = resume_config(args.out, overrides) if args.resume else GPTTrainConfig(out=args.out, **overrides)
    except (TypeError, ValueError) as e:
        raise toolkit.CLIError(with_flag_names(str(e))) from None
    dist.init()
    if not dist.is_main():  # data parallel: rank 0 alone prints (every rank's errors reach stderr)
        sys.stdout = open(os.devnull, "w")
    trainer = GPTTrainer(cfg, TrainingReport() if args.no_progress or not dist.is_main() else IterationBar())
    if args.overwrite and dist.is_main():
        toolkit.remove_files(cfg.out, RUN_FILES[:2] + RUN_FILES[3:])  # (the new run has begun its metrics already)
    server = start_explorer(trainer, args) if args.explore and dist.is_main() else None
    print_training_header(trainer)
    try:
        with compiling_notice("gpt train") if dist.is_main() else contextlib.nullcontext():
            summary = trainer.run()
    except Interrupted as e:
        if dist.is_main():
            draw_loss_plot(args.load_plots, trainer.metrics_path, os.path.join(cfg.out, "loss.png"))
        print(f"\n{e}", flush=True)
        return 130
    finally:
        if server is not None:
            server.wait_for_readers()  # an open page reads the run's end, then stops asking
            server.stop()
    if not dist.is_main():
        return 0
    plot = draw_loss_plot(args.load_plots, trainer.metrics_path, os.path.join(cfg.out, "loss.png"))
    print_training_summary(trainer, summary, plot)
    return 0


def start_explorer(trainer, args):
    """--explore: the run's events go to OUT/events.jsonl (transformer.events, with the GPT's probes),
    and the live page (viz.watch) is served while it trains. Returns the server."""
    from transformer.events import explore

    from .probes import TextProbes
    server = toolkit.start_server(args.load_watch().serve, trainer.cfg.out, args.host, args.port, "gpt train")
    explore(trainer, TextProbes(trainer))
    print(f"live page: {server.url} (after the run: python3 -m viz watch {trainer.cfg.out})", flush=True)
    return server


def print_training_header(trainer) -> None:
    cfg, data, model = trainer.cfg, trainer.data, trainer.model
    if cfg.resume:
        print(f"resuming from iter {trainer.iter} of {trainer.checkpoint_path}")
    print(f"training a GPT on {data.source} ({len(data.text):,} characters): {cfg.tokenizer} tokenizer, "
          f"{data.tokenizer.vocab_size:,} tokens; train {len(data.ids['train']):,} / val {len(data.ids['val']):,} "
          f"tokens (val: {data.val_source})")
    end = (f"iter {cfg.lr_decay_iters:,}" if cfg.lr_decay_iters is not None else
           "the end of the time budget" if cfg.minutes is not None else f"iter {cfg.max_iters:,}")
    schedule = (f"{cfg.learning_rate:g} -> {cfg.min_lr:g} (warmup {cfg.warmup_iters}, cosine to {end})"
                if cfg.decay_lr else f"{cfg.learning_rate:g}")
    muon = f"; Muon at {cfg.muon_lr:g} on the same schedule" if cfg.optimizer == "muon" else ""
    print(f"model: n_layer {cfg.n_layer}, n_head {cfg.n_head}, n_embd {cfg.n_embd}, block_size {cfg.block_size}: "
          f"{model.num_params() / 1e6:.2f}M parameters; batch {cfg.batch_size}, lr {schedule}{muon}")
    budget = f"{trainer.budget.describe()}, or " if cfg.minutes is not None else ""
    print(f"budget: {budget}{cfg.max_iters:,} iterations; evaluating every {cfg.eval_interval} "
          f"({cfg.eval_iters} batches a split); {trainer.threads} thread(s); step "
          f"{'compiled' if cfg.compile else 'eager'}", flush=True)
    if trainer.lr_scale != 1:
        ranks = round(trainer.lr_scale ** 2)
        print(f"data parallel: {ranks} ranks, each a batch of --batch-size {cfg.batch_size} a step ({ranks} "
              f"batches a step); learning rates x {trainer.lr_scale:.3g} (sqrt of the ranks)", flush=True)


def draw_loss_plot(load_plots, metrics_path: str, out: str) -> str | None:
    """OUT/loss.png from the metrics (load_plots: viz.plots); a plot that fails is a warning, never a failed run."""
    try:
        load_plots().plot_loss_curves(metrics_path, out=out, keys=("train_loss", "val_loss"), x_key="iter",
                         labels={"train_loss": "train loss (estimate, eval mode)", "val_loss": "val loss (estimate)"})
    except Exception as e:  # noqa: BLE001  (the run's files are saved; the plot is extra)
        print(f"warning: no loss plot: {message_for_user(e)}", file=sys.stderr)
        return None
    return out


def print_training_summary(trainer, summary: dict, plot: str | None) -> None:
    best = summary["best_val_loss"]
    where = (f"the average of the last {summary['averaged']} evaluations" if summary.get("averaged")
             else f"iter {summary['best_iter']:,}")
    print(f"done: {summary['iters']:,} iterations ({summary['seconds']:.0f} s); best val loss {best:.4f}: {where}")
    print(f"  best model: {summary['best']}")
    print(f"  checkpoint: {summary['checkpoint']} (continue with --resume)")
    print(f"  metrics:    {summary['metrics']}")
    print(f"  step:       {summary['step']}")
    if plot:
        print(f"  loss plot:  {plot}")
    print(f"the whole val split: python -m transformer gpt eval --checkpoint {summary['best']}", flush=True)


# ---------------------------------------------------------------- eval
def eval_text(args, meta: dict) -> tuple[str, str]:
    """(the validation text, where it comes from): --val, the last 10% of --data, else of the data the
    checkpoint recorded (its --val or --data), else of the built-in text."""
    from .text import builtin_text, split
    from .text_data import read_text
    if args.val:
        return read_text(args.val, "validation file"), args.val
    if args.data:
        return split(read_text(args.data), 0.9)[1], f"the last 10% of {args.data}"
    trained = meta.get("train_config") or {}
    for key, what in (("val", "validation file"), ("data", "data file")):
        path = trained.get(key)
        if path and not os.path.isfile(path):
            raise toolkit.CLIError(f"gpt eval: the checkpoint was trained with {what} {path}, which is not there now; "
                           "pass --data or --val")
        if path:
            text = read_text(path, what)
            return (text, path) if key == "val" else held_out(text, path, meta)
    return held_out(builtin_text(), "the built-in text", meta)


def held_out(text: str, source: str, meta: dict) -> tuple[str, str]:
    """The last 10% of the text the checkpoint was trained on, with a warning if that text has changed."""
    from .text import split
    from .text_data import fingerprint
    if fingerprint(text) != (meta.get("data") or {}).get("sha256", fingerprint(text)):
        print(f"warning: {source} has changed since the checkpoint was trained on it (its SHA-256 differs): "
              "its last 10% is not exactly the split that training held out", file=sys.stderr)
    return split(text, 0.9)[1], f"the last 10% of {source}"


def cmd_eval(args) -> int:
    from .tokenizers import tokenizer_from_dict
    from .training import evaluate_split, load_checkpoint
    path = args.checkpoint or default_checkpoint()
    toolkit.check_input_file(path, "checkpoint", " (train one with `python -m transformer gpt train`)")
    for given, what in ((args.data, "data file"), (args.val, "validation file")):
        if given:
            toolkit.check_input_file(given, what)
    model, meta = load_checkpoint(path)
    if "tokenizer" not in meta:
        raise toolkit.CLIError(f"gpt eval: {path} holds no tokenizer (it was not written by gpt train)")
    tokenizer = tokenizer_from_dict(meta["tokenizer"])
    text, source = eval_text(args, meta)
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise toolkit.CLIError(f"gpt eval: {source} is {len(ids)} token(s); a loss needs at least 2")
    batch_size = (meta.get("train_config") or {}).get("batch_size") or DEFAULTS["batch_size"]
    with compiling_notice("gpt train"):
        loss = evaluate_split(model, ids, model.config.block_size, batch_size)
    bits_per_char = loss / math.log(2) * len(ids) / len(text)
    print(f"checkpoint {path}: iter {meta.get('iter', '?')}, {model.num_params() / 1e6:.2f}M parameters, "
          f"{tokenizer.kind} tokenizer of {tokenizer.vocab_size:,} tokens")
    print(f"{source}: {len(text):,} characters, {len(ids):,} tokens, each after the first predicted once "
          f"in windows of {model.config.block_size}")
    print(f"val loss {loss:.4f}  perplexity {math.exp(loss):.3f}  bits per character {bits_per_char:.4f}")
    return 0


# ---------------------------------------------------------------- sample
def add_sample_parser(sub, common) -> None:
    s = sub.add_parser("sample", parents=[common], help="write text with a trained GPT, token by token",
                       description="Continue a prompt as nanoGPT's sample.py: the prompt, then each new token as "
                                   "it is drawn from softmax(logits / temperature), cut to the top-k, then to the "
                                   "nucleus top-p (transformer.gpt.sampling).")
    s.set_defaults(run=cmd_sample)
    s.add_argument("--checkpoint", help=f"a GPT checkpoint (default {default_checkpoint()})")
    s.add_argument("--prompt", default="\n", help="the text to continue (default a newline, as nanoGPT's)")
    s.add_argument("--max-new-tokens", type=toolkit.non_negative_int, default=500, help="tokens to write (default 500)")
    s.add_argument("--temperature", type=toolkit.non_negative_float, default=0.8,
                   help="below 1 sharper, above 1 flatter; 0 is greedy (default 0.8)")
    s.add_argument("--top-k", type=toolkit.positive_int, default=200,
                   help="draw among the k most probable tokens only (default 200, nanoGPT's)")
    s.add_argument("--top-p", type=toolkit.positive_float, default=None,
                   help="then among the fewest most probable tokens whose probability reaches p, in (0, 1] "
                        "(nucleus sampling; default off)")
    toolkit.add_seed(s, "the same seed writes the same sample (default: a fresh one, shown at the end)")
    s.add_argument("--num-samples", type=toolkit.positive_int, default=1,
                   help="samples to write, each with the next seed (default 1)")


def sample_prompt(args, tokenizer):
    """The prompt's token ids, or a one-line toolkit.CLIError."""
    if args.top_p is not None and args.top_p > 1:
        raise toolkit.CLIError(f"gpt sample: --top-p must be in (0, 1], got {args.top_p:g}")
    if not args.prompt:
        raise toolkit.CLIError("gpt sample: --prompt is empty; give it at least one character "
                               "(the default is a newline)")
    try:
        return tokenizer.encode(args.prompt)
    except ValueError as e:
        raise toolkit.CLIError(f"gpt sample: --prompt: {e}") from None


def cmd_sample(args) -> int:
    from .sampling import generate
    from .tokenizers import tokenizer_from_dict
    from .training import load_checkpoint
    path = args.checkpoint or default_checkpoint()
    toolkit.check_input_file(path, "checkpoint", " (train one with `python -m transformer gpt train`)")
    model, meta = load_checkpoint(path)
    if "tokenizer" not in meta:
        raise toolkit.CLIError(f"gpt sample: {path} holds no tokenizer (it was not written by gpt train)")
    tokenizer = tokenizer_from_dict(meta["tokenizer"])
    ids = sample_prompt(args, tokenizer)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    with compiling_notice("gpt sample"):
        for i in range(args.num_samples):
            if i:
                print("---------------")  # nanoGPT's line between samples
            sys.stdout.write(args.prompt)
            decoder = tokenizer.decoder()  # holds back a character split across tokens
            for token in generate(model, ids, args.max_new_tokens, args.temperature, args.top_k, args.top_p,
                                  seed + i):
                sys.stdout.write(decoder.push(token))
                sys.stdout.flush()
            print(decoder.flush(), flush=True)
    if args.seed is None:
        print(f"(seed {seed}: --seed {seed} writes this again)", file=sys.stderr)
    return 0
