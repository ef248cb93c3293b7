"""python -m transformer {train, translate, eval, explain}: the toy Chinese→English translator; gpt: a GPT.

Errors print one line and exit non-zero; --debug shows the traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import warnings

from tinygrad_lite.cli import (
    CLIError,
    OneLineParser,
    add_compile,
    add_explore,
    add_minutes,
    add_run_flags,
    add_seed,
    check_input_file,
    check_output_dir,
    check_run_flags,
    common_flags,
    compile_chosen,
    finite_float,
    minutes_limit,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    remove_files,
    removed_if_left_empty,
    run_command,
    start_server,
)
from transformer.gpt.cli import DESCRIPTION as GPT_DESCRIPTION
from transformer.gpt.cli import add_commands as add_gpt_commands
from transformer.gpt.cli import nanogpt_spelling
from transformer.kernel_cache import compiling_notice

DEFAULT_OUT = "runs/translator"
BEST_CHECKPOINT = os.path.join(DEFAULT_OUT, "best.safetensors")
LATEST_CHECKPOINT = os.path.join(DEFAULT_OUT, "checkpoint.safetensors")


def default_checkpoint() -> str:
    """The best model on dev of the default run, else its latest checkpoint."""
    return BEST_CHECKPOINT if os.path.exists(BEST_CHECKPOINT) or not os.path.exists(LATEST_CHECKPOINT) \
        else LATEST_CHECKPOINT
CHECKPOINT_HINT = " (train one with `python -m transformer train`)"


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m transformer", description=__doc__.splitlines()[0])
    common = common_flags(p)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", parents=[common], help="train the translator (built-in corpus by default)",
                       description="Train the translator. Data parallel: mpiexec -n K python -m transformer "
                                   "train ... runs K ranks, each on its own batches (README: 'Training on "
                                   "several processes or machines').")
    t.set_defaults(run=cmd_train)
    add_train_data_arguments(t)
    add_train_model_arguments(t)
    add_train_recipe_arguments(t)
    add_train_output_arguments(t)
    add_translate_parser(sub, common)
    add_eval_parser(sub, common)
    gpt = sub.add_parser("gpt", parents=[common], spell=nanogpt_spelling, description=GPT_DESCRIPTION,
                         help="a GPT from the same blocks: train, sample, eval (python -m transformer gpt --help)")
    add_gpt_commands(gpt, common, load_plots, load_watch)
    sub.add_parser("explain", help="the article, computed: run the walkthrough "
                                  "(flags: --section NAME, --figures DIR, --checkpoint PATH)")
    return p


def add_train_data_arguments(t) -> None:
    """train: what to train on, for how long, from where."""
    t.add_argument("--data", help="zh<TAB>en TSV or Tatoeba/Anki (en<TAB>zh<TAB>attribution) file")
    t.add_argument("--dev", help="dev file (same formats); default: split off --data")
    t.add_argument("--test", help="test file (same formats); default: split off --data")
    add_run_flags(t, DEFAULT_OUT, held="its checkpoints, metrics, loss.png and report; --resume: with any "
                                     "number of ranks")
    t.add_argument("--epochs", type=positive_int, default=None)
    add_minutes(t)
    t.add_argument("--max-steps", type=positive_int, default=None)
    add_seed(t)


def add_train_model_arguments(t) -> None:
    """train: the model's size."""
    t.add_argument("--d-model", type=positive_int, default=None)
    t.add_argument("--heads", type=positive_int, default=None)
    t.add_argument("--layers", type=positive_int, default=None)
    t.add_argument("--d-ff", type=positive_int, default=None)
    t.add_argument("--dropout", type=non_negative_float, default=None)


def add_train_recipe_arguments(t) -> None:
    """train: optimisation and batching."""
    t.add_argument("--lr", type=positive_float, default=None, help="multiplier of the Noam schedule")
    t.add_argument("--lr-scaling", choices=["sqrt", "linear", "none"], default=None,
                   help="under mpiexec -n K (K batches a step): multiply --lr by sqrt(K) (default, Adam's "
                        "square-root rule), by K, or not at all")
    t.add_argument("--warmup", type=positive_int, default=None)
    t.add_argument("--max-tokens", type=positive_int, default=None,
                   help="target tokens per batch, per rank: under mpiexec -n K a step trains on K batches "
                        "(K times the tokens), as in DDP")
    t.add_argument("--label-smoothing", type=non_negative_float, default=None)
    t.add_argument("--min-freq", type=positive_int, default=None,
                   help="keep tokens seen at least this often in training (rarer ones read as <unk>)")
    t.add_argument("--batch-by", choices=["padded", "target"], default=None,
                   help="what --max-tokens counts: padded B*max(S,T) of length-bucketed batches, "
                        "or the real target tokens of random batches")
    t.add_argument("--bucket-pool", type=non_negative_int, default=None,
                   help="with --batch-by target: sort by length within pools of N batches (0: off; the real-data "
                        "recipe's 20 applies to its own batch size, and an explicit --max-tokens means 0)")
    t.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction, default=None,
                   help="share the target embedding and the generator's weights (paper 3.4)")
    t.add_argument("--final-norm", action=argparse.BooleanOptionalAction, default=None,
                   help="close each stack with a LayerNorm (torch.nn.Transformer does)")
    t.add_argument("--embed-init", choices=["normal", "xavier"], default=None,
                   help="embedding init: N(0, 1/d_model) (default) or Xavier-uniform (PyTorch tutorial)")
    t.add_argument("--clip", type=non_negative_float, default=None, help="gradient-norm clip (0: off)")
    add_compile(t)
    t.add_argument("--cooldown", type=non_negative_float, default=None,
                   help="lower the lr linearly to 0 over this last share of the run's budget (--minutes, "
                        "--max-steps or --epochs; 0: off)")


def add_train_output_arguments(t) -> None:
    """train: evaluations, checkpoints, progress."""
    t.add_argument("--eval-every", type=non_negative_int, default=None,
                   help="also evaluate on dev every N steps (0: at the end of each epoch)")
    t.add_argument("--average", type=non_negative_int, default=None,
                   help="at the end, also try the mean of the last N evaluated models "
                        "(checkpoint averaging)")
    t.add_argument("--save-every", type=non_negative_int, default=None,
                   help="also checkpoint every N steps (0: only at the end of each epoch)")
    t.add_argument("--no-progress", action="store_true")
    add_explore(t, "curves, gradient norms by module, probe translations and attention")


def add_translate_parser(sub, common) -> None:
    tr = sub.add_parser("translate", parents=[common], help="translate sentences (arguments, or lines on stdin)")
    tr.set_defaults(run=cmd_translate)
    tr.add_argument("sentences", nargs="*")
    tr.add_argument("--checkpoint", default=None, help=f"default {BEST_CHECKPOINT}")
    add_beam_arguments(tr)
    tr.add_argument("--sample", action="store_true", help="sample instead of greedy/beam")
    tr.add_argument("--temperature", type=finite_float, default=1.0)
    add_seed(tr, "with --sample: the same seed draws the same translation")
    tr.add_argument("--show-attention", metavar="IMAGE",
                    help="also draw the first sentence's attention into this ONE image (.png, .svg or .pdf): "
                         "a section each for encoder self-, decoder self- and cross-attention, layers x heads")


def add_eval_parser(sub, common) -> None:
    e = sub.add_parser("eval", parents=[common], help="BLEU, chrF and exact match on a test set")
    e.set_defaults(run=cmd_eval)
    e.add_argument("--data", help="test file; default: the built-in test and novel splits")
    e.add_argument("--checkpoint", default=None, help=f"default {BEST_CHECKPOINT}")
    e.add_argument("--out", help="write hypotheses here (default: next to the checkpoint)")
    add_beam_arguments(e)


def add_beam_arguments(parser) -> None:
    """Beam search as in the paper (§6.1: beam size 4, length penalty α = 0.6)."""
    parser.add_argument("--beam", type=int, default=4, help="beam size (default 4, the paper's; 1: greedy)")
    parser.add_argument("--length-penalty", type=finite_float, default=0.6, metavar="ALPHA",
                        help="rank finished hypotheses by log-prob / length^ALPHA (default 0.6, the paper's)")


def check_beam_arguments(args) -> None:
    if args.beam < 1:
        raise CLIError(f"--beam must be >= 1, got {args.beam}")


def build_explain_parser() -> argparse.ArgumentParser:
    """The walkthrough's own flags (transformer.walkthrough), checked here so a typo is one line."""
    p = OneLineParser(prog="python -m transformer explain",
                      description="the article, computed: run the walkthrough (transformer.walkthrough)")
    p.add_argument("--debug", action="store_true", help="show full tracebacks")
    p.add_argument("--section", metavar="NAME", help="run one section (name or number 1-15)")
    p.add_argument("--figures", metavar="DIR", help="write the figures into DIR")
    p.add_argument("--checkpoint", metavar="PATH", help="translator checkpoint for the last section")
    return p


def draw_loss_curve(out_dir, with_dev: bool = True, label_smoothing: float = 0.0, dropout: float = 0.0):
    """The callback that redraws OUT/loss.png from the metrics log after each evaluation
    (the training loss alone when there is no dev split). The training loss's label names the
    label smoothing and dropout it was measured with, when the run used them."""
    keys = ("train_loss", "dev_loss") if with_dev else ("train_loss",)
    used = [name for name, value in (("label smoothing", label_smoothing), ("dropout", dropout)) if value]
    label = "train loss" + (f" (with {' and '.join(used)})" if used else "")

    def draw(metrics_path):
        from viz.plots import plot_loss_curves
        return plot_loss_curves(metrics_path, out=os.path.join(out_dir, "loss.png"), keys=keys,
                                labels={"train_loss": label})
    return draw


RUN_FILES = ("checkpoint.safetensors", "best.safetensors", "metrics.jsonl", "loss.png", "report.json", "events.jsonl")


def check_run_arguments(args) -> None:
    """--dev/--test need --data; a run already in --out is continued (--resume) or replaced
    (--overwrite), never overwritten unasked."""
    for flag in ("dev", "test"):
        if getattr(args, flag) and not args.data:
            raise CLIError(f"train: --{flag} needs --data (the built-in corpus has its own {flag} split); "
                           f"e.g. python3 -m transformer train --data train.tsv --{flag} {getattr(args, flag)}")
    check_run_flags(args, RUN_FILES[:3], "train")


def train_overrides(args) -> dict:
    """The TrainConfig fields given on the command line, checked."""
    from .train import TrainConfig
    overrides = {k: getattr(args, k) for k in (
        "data", "dev", "test", "epochs", "minutes", "max_steps", "d_model", "heads", "layers", "d_ff", "dropout",
        "lr", "lr_scaling", "warmup", "max_tokens", "label_smoothing", "save_every", "seed", "min_freq", "batch_by",
        "bucket_pool", "tie_embeddings", "clip", "eval_every", "average", "final_norm", "embed_init",
        "cooldown")
        if getattr(args, k) is not None}
    if "minutes" in overrides:
        overrides["minutes"] = minutes_limit(overrides["minutes"])  # 0: no limit, as in every trainer
    if overrides.get("dropout", 0) >= 1:
        raise CLIError(f"--dropout must be in [0, 1), got {overrides['dropout']}")
    if overrides.get("cooldown", 0) > 1:
        raise CLIError(f"--cooldown must be a share of the budget in [0, 1], got {overrides['cooldown']}")
    if overrides.get("label_smoothing", 0) > 1:
        raise CLIError(f"--label-smoothing must be in [0, 1], got {overrides['label_smoothing']}")
    if "d_model" in overrides or "heads" in overrides:
        d, h = overrides.get("d_model", TrainConfig.d_model), overrides.get("heads", TrainConfig.heads)
        if d % h:
            raise CLIError(f"--d-model {d} must be divisible by --heads {h}")
    return overrides


def cmd_train(args) -> int:
    from tinygrad_lite import distributed as dist

    from .train import Interrupted, Trainer, TrainingReport
    cfg = train_config(args)
    dist.init()
    if not dist.is_main():  # data parallel: rank 0 alone prints (every rank's errors reach stderr)
        sys.stdout = open(os.devnull, "w")
    if cfg.progress and dist.is_main():
        from .progress import ProgressBar
        report = ProgressBar()
    else:
        report = TrainingReport()
    with removed_if_left_empty(cfg.out):  # a --data that fails to read leaves no empty --out behind
        trainer = Trainer(cfg, report=report)
    if args.overwrite and dist.is_main():
        remove_files(cfg.out, RUN_FILES)
    with_dev = bool(trainer.data.splits.get("dev"))
    trainer.on_eval = draw_loss_curve(cfg.out, with_dev, cfg.label_smoothing, cfg.dropout)
    server = start_explorer(trainer, args) if args.explore and dist.is_main() else None
    print_training_header(trainer, dist.world_size())
    try:
        with compiling_notice("train") if dist.is_main() else contextlib.nullcontext():
            report = trainer.run()
    except Interrupted:  # every rank stopped after the same step; rank 0 saved the checkpoint
        return 130
    finally:
        if server is not None:
            server.wait_for_readers()  # an open page reads the run's end, then stops asking
            server.stop()
    if report is None:  # data parallel: ranks other than 0 are done
        return 0
    print_training_summary(trainer, report, with_dev)
    return 0


def train_config(args):
    """The TrainConfig of `train`'s arguments, checked: the real-data recipe under --data, the flags
    set explicitly over it."""
    from .train_config import TrainConfig, real_data_config
    overrides = train_overrides(args)
    for path in (args.data, args.dev, args.test):
        if path:
            check_input_file(path, "data file")
    check_run_arguments(args)
    explicit = sorted(overrides)
    if args.data and not args.resume:  # a real corpus: its own recipe, under what was set explicitly
        overrides = real_data_config(overrides)
    if "epochs" not in overrides and (args.minutes or args.max_steps):
        overrides["epochs"] = None  # the budget or the step count ends the run, not an epoch cap
    return TrainConfig(out=args.out, resume=args.resume, progress=not args.no_progress,
                       compile=compile_chosen(args), extra={"explicit": explicit}, **overrides)


def print_training_summary(trainer, report: dict, with_dev: bool) -> None:
    """The run's last lines (where its model is, what the step ran as, the held-out scores, an example)
    and OUT/report.json."""
    from tinygrad_lite.files import atomic_write

    from .plugins.compiled import describe_step
    kept = "best model on dev" if with_dev else "model (no dev split: the latest)"
    print(f"done: {report['steps']} steps in {report['seconds']:.0f} s; {kept}: {report['checkpoint']} "
          f"(latest, for --resume: {trainer.checkpoint_path})")
    print(f"step: {describe_step(trainer.compiled)}")
    for split, label in (("test", "held-out test"), ("novel", "compositional (novel combinations)")):
        if split in report:
            r = report[split]
            print(f"{label:>36}: exact match {100 * r['exact_match']:.1f}%  BLEU {r['bleu']:.1f}  "
                  f"chrF {r['chrf']:.1f}  ({r['n']} sentences)")
    if report.get("example"):
        from .translator import for_display
        print(f"这是一个苹果 -> {for_display(report['example'])}")
    with atomic_write(os.path.join(trainer.cfg.out, "report.json"), durable=False, op="train") as temp:
        temp.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")


def start_explorer(trainer, args):
    """--explore: the run's events go to OUT/events.jsonl (transformer.events), and the live page
    (viz.watch) is served from 127.0.0.1 while it trains. Returns the server."""
    from viz.watch import serve

    from .events import explore
    server = start_server(serve, trainer.cfg.out, args.host, args.port, "train")
    explore(trainer)
    print(f"live page: {server.url} (after the run: python3 -m viz watch {trainer.cfg.out})", flush=True)
    return server


def print_training_header(trainer, ranks: int) -> None:
    cfg = trainer.cfg
    if cfg.resume:
        print(f"resuming from step {trainer.step} (epoch {trainer.epoch + 1}, batch {trainer.batch_in_epoch}) "
              f"of {trainer.checkpoint_path}")
        if cfg.minutes is not None:
            print(f"budget: {trainer.budget.describe()}")
    print(f"training on {'the built-in corpus' if cfg.data is None else cfg.data}: "
          f"{len(trainer.data.splits['train'])} train / {len(trainer.data.splits.get('dev', []))} dev pairs, "
          f"vocab zh {len(trainer.data.src_vocab)} / en {len(trainer.data.tgt_vocab)}, "
          f"{trainer.model.num_parameters():,} parameters; step {'compiled' if cfg.compile else 'eager'}")
    if ranks > 1:
        from .train import scaled_lr
        print(f"data parallel: {ranks} ranks, each a batch of --max-tokens {cfg.max_tokens} a step ({ranks} "
              f"batches a step); Noam multiplier {scaled_lr(cfg, ranks):.3g} (--lr {cfg.lr:g}, --lr-scaling "
              f"{cfg.lr_scaling})")


def cmd_translate(args) -> int:
    from .translator import Translator
    check_beam_arguments(args)
    if not args.temperature > 0:
        raise CLIError(f"--temperature must be > 0, got {args.temperature}")
    args.checkpoint = args.checkpoint or default_checkpoint()
    check_input_file(args.checkpoint, "checkpoint", CHECKPOINT_HINT)
    if args.show_attention:  # a bad file name fails before any translating
        from viz.render import check_output_path
        check_output_path(args.show_attention, formats=("png", "svg", "pdf"), op="--show-attention")
    translator = Translator.load(args.checkpoint)
    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not sentences:
        raise CLIError("translate: no sentence given (pass one as an argument or on stdin)")
    with compiling_notice("sample" if args.sample else "translate"):
        for sentence in sentences:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                text = translator.translate_text(sentence, beam=args.beam, sample=args.sample,
                                                 temperature=args.temperature, seed=args.seed,
                                                 length_penalty=args.length_penalty)
            for w in caught:
                print(f"warning: {w.message}", file=sys.stderr)
            print(text)
    if args.show_attention:
        from viz.attention_maps import write_attention
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            path = write_attention(translator, sentences[0], args.show_attention)
        for w in caught:  # the translator's own warnings were printed with the translation
            if w.category.__module__.startswith("viz"):
                print(f"warning: {w.message}", file=sys.stderr)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_eval(args) -> int:
    from tinygrad_lite.files import atomic_write

    from .data import builtin_corpus
    from .evaluation import evaluate_translations
    from .train_data import read_pairs
    from .translator import Translator
    check_beam_arguments(args)
    args.checkpoint = args.checkpoint or default_checkpoint()
    check_input_file(args.checkpoint, "checkpoint", CHECKPOINT_HINT)
    if args.data:
        check_input_file(args.data, "data file")
    if args.out and os.path.isdir(args.out):
        raise CLIError(f"--out {args.out} is a directory; expected a file name for the hypotheses")
    translator = Translator.load(args.checkpoint)
    if args.data:
        result = read_pairs(args.data)
        sets = {os.path.splitext(os.path.basename(args.data))[0]: result.pairs}
    else:
        corpus = builtin_corpus()
        sets = {"test": corpus["test"], "novel": corpus["novel"]}
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.checkpoint)), "hypotheses")
    for name, pairs in sets.items():
        r = evaluate_translations(translator, pairs, beam=args.beam, length_penalty=args.length_penalty)
        path = out if args.data and args.out else f"{out}.{name}.txt"
        with atomic_write(path, durable=False, op="eval") as temp:
            temp.write_text("\n".join(r["hypotheses"]) + "\n", encoding="utf-8")
        label = "compositional generalisation (novel)" if name == "novel" else name
        decoding = f"beam {args.beam}, length penalty {args.length_penalty:g}" if args.beam > 1 else "greedy"
        print(f"{label} ({decoding}): BLEU {r['bleu']:.2f}  chrF {r['chrf']:.2f}  "
              f"exact match {100 * r['exact_match']:.2f}%  ({r['n']} sentences) -> {path}")
    return 0


def load_watch():
    """viz.watch, the live training page of --explore (transformer.gpt.cli may not import viz)."""
    import viz.watch
    return viz.watch


def load_plots():
    """viz.plots, for the walkthrough's --figures: the CLI may import both packages, the
    walkthrough itself (inside `transformer`) may not import `viz`."""
    import viz.plots
    return viz.plots


def cmd_explain(args) -> int:
    """Run transformer.walkthrough's main() with the flags after `explain`."""
    from transformer.walkthrough import main as walkthrough_main
    if args.checkpoint is not None:
        check_input_file(args.checkpoint, "checkpoint", CHECKPOINT_HINT)
    if args.figures is not None:
        check_output_dir(args.figures, "--figures")
    return walkthrough_main(args.walkthrough_argv, load_plots=load_plots)


def parse(argv: list) -> argparse.Namespace:
    """Parse the command line; `explain` forwards its flags (after an optional `--`) to the
    walkthrough, so they are checked by a parser of their own."""
    before = argv[:argv.index("explain")] if "explain" in argv else None
    if before is not None and all(a == "--debug" for a in before):
        rest = argv[len(before) + 1:]
        forwarded = rest[1:] if rest[:1] == ["--"] else rest
        args = build_explain_parser().parse_args(forwarded)
        args.debug = args.debug or bool(before)
        args.command, args.threads, args.run = "explain", None, cmd_explain
        args.walkthrough_argv = [a for a in forwarded if a != "--debug"]
        return args
    return build_parser().parse_args(argv)


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else list(argv))
    return run_command(args, args.run)


if __name__ == "__main__":
    sys.exit(main())
