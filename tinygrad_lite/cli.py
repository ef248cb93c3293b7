"""The command-line toolkit of `python -m transformer`, `python -m transformer gpt` and
`python -m viz`: one parser whose mistakes are one line (with "did you mean"), the flags every
program spells the same way (--debug, --threads, --seed, --out/--resume/--overwrite, --minutes,
--no-compile, --explore),
the checks of the files a command reads and writes, and the run that turns an error into one line.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import math
import os
import sys
import traceback
import warnings

from .checks import message_for_user, switched_off, switched_on


class CLIError(Exception):
    """A mistake on the command line, said in the user's words (the flags, not the code)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (exit 2), not a usage block. Flags must be
    spelled out (no abbreviations: `--epoch` for `--epochs` is a mistake), and a misspelt one is
    answered with the flags it may have meant. `spell`, if given, rewrites the arguments this parser
    gets before it reads them (the GPT takes nanoGPT's --n_layer=4)."""

    def __init__(self, *args, spell=None, **kwargs):
        self.spell = spell
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    @property
    def flags(self) -> set:
        """Every --flag of this parser and of the parsers under it (its subcommands')."""
        found = set()
        for action in self._actions:
            found.update(s for s in action.option_strings if s.startswith("--"))
            for child in (action.choices or {}).values() if isinstance(action.choices, dict) else ():
                found |= child.flags
        return found

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unrecognized flag is reported by the subcommand it was given to,
        which suggests from its own flags."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.chosen(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def chosen(self, parsed) -> OneLineParser:
        """The (sub)command parser that `parsed` was read by: this one, or the subcommand's it names."""
        for action in self._actions:
            if isinstance(action.choices, dict) and getattr(parsed, action.dest, None) in action.choices:
                child = action.choices[getattr(parsed, action.dest)]
                return child.chosen(parsed) if isinstance(child, OneLineParser) else self
        return self

    def parse_known_args(self, args=None, namespace=None):
        if self.spell is not None:
            args = self.spell(sys.argv[1:] if args is None else list(args), self.flags)
        return super().parse_known_args(args, namespace)

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {message}{self.suggest(message)} (see --help)\n")

    def suggest(self, message: str) -> str:
        """' (did you mean --epochs?)' for an unrecognized flag that starts or nearly spells one."""
        if not message.startswith("unrecognized arguments"):
            return ""
        flags, meant = self.flags, []
        for given in message.split(":", 1)[1].split():
            flag = given.split("=")[0]
            if flag.startswith("--"):
                meant += sorted(f for f in flags if f.startswith(flag)) or \
                    difflib.get_close_matches(flag, flags, n=1)
        return f" (did you mean {' or '.join(dict.fromkeys(meant))}?)" if meant else ""


def _number(parse, kind: str, ok, requirement: str):
    """An argparse type: parse the text as `kind`, then insist that ok(value) holds."""
    def convert(text):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text.strip()}")
        return value
    return convert


positive_int = _number(int, "a whole number", lambda v: v > 0, "> 0")
non_negative_int = _number(int, "a whole number", lambda v: v >= 0, ">= 0")
finite_float = _number(float, "a number", math.isfinite, "a finite number")
non_negative_float = _number(float, "a number", lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")
positive_float = _number(finite_float, "a number", lambda v: v > 0, "> 0")


# ---------------------------------------------------------------- the flags every program spells alike
def common_flags(parser: argparse.ArgumentParser, threads: bool = True) -> argparse.ArgumentParser:
    """--debug (and --threads) on `parser`, and the parent parser that lets each subcommand take them
    too, before or after its name."""
    common = argparse.ArgumentParser(add_help=False)
    for target, default in ((parser, None), (common, argparse.SUPPRESS)):
        target.add_argument("--debug", action="store_true", help="show full tracebacks",
                            **({} if default is None else {"default": default}))
        if threads:
            target.add_argument("--threads", type=positive_int, default=default,
                                help="threads for BLAS and Numba (default 1, or $TINYGRAD_LITE_NUM_THREADS)")
    return common


def add_seed(parser, help: str = "default 0", default=None) -> None:
    parser.add_argument("--seed", type=non_negative_int, default=default, help=help)


def add_minutes(parser, default_help: str = "none") -> None:
    """--minutes: the run's time budget; 0 means no limit, in every trainer (see minutes_limit)."""
    parser.add_argument("--minutes", type=non_negative_float, default=None,
                        help=f"stop after this much time, evaluations included; 0: no limit (default {default_help})")


def minutes_limit(minutes: float) -> float | None:
    """--minutes as a trainer's config takes it: None (no limit) for 0."""
    return minutes or None


COMPILE_ENV = "TINYGRAD_LITE_COMPILE"  # 0 / 1: trainers run their steps eagerly / compiled unless a flag says


def add_compile(parser, default: bool = True, why: str = "") -> None:
    """--compile / --no-compile: a trainer's step (loss to optimizer step) as a compiled plan or eagerly,
    op by op; without either flag ${COMPILE_ENV} decides (0 or 1), else the command's `default`, which
    the parsed arguments carry (compile_chosen reads it there)."""
    chosen = "compiled" if default else "eager"
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="run the whole training step as a compiled plan (tinygrad_lite.compiler); "
                             f"--no-compile: eagerly, op by op (default: {chosen}{why}, or ${COMPILE_ENV}=0/1)")
    parser.set_defaults(compile_by_default=default)


def compile_chosen(args) -> bool:
    """Whether the run compiles its step: --compile / --no-compile, else ${COMPILE_ENV} (0, false, off,
    no: eager; 1, true, on, yes: compiled), else the command's default (add_compile)."""
    if getattr(args, "compile", None) is not None:
        return args.compile
    if switched_on(COMPILE_ENV):
        return True
    if switched_off(COMPILE_ENV):
        return False
    return args.compile_by_default


def add_explore(parser, shown: str) -> None:
    """--explore (serve the live training page, `shown` saying what it shows) with --host and --port."""
    parser.add_argument("--explore", action="store_true",
                        help=f"serve the live page while training ({shown}; alerts) and print its URL; "
                             "events go to OUT/events.jsonl")
    parser.add_argument("--host", default="127.0.0.1", help="--explore: address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=non_negative_int, default=0, help="--explore: port (default 0: any free one)")


def start_server(serve, folder, host: str, port: int, op: str):
    """`serve(folder, host, port)` (viz.watch.serve), or a CLIError saying why it cannot serve there."""
    try:
        return serve(folder, host, port)
    except OSError as e:
        raise CLIError(f"{op}: --explore cannot serve on {host}:{port}: {e.strerror or e}") from None


def add_run_flags(parser, default_out: str, held: str) -> None:
    """--out DIR, and --resume / --overwrite for a run already in it (`held`: what --overwrite removes)."""
    parser.add_argument("--out", default=default_out, help=f"output directory (default {default_out})")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out from its checkpoint.safetensors")
    parser.add_argument("--overwrite", action="store_true", help=f"replace the run already in --out ({held})")


def check_run_flags(args, held_files, op: str) -> None:
    """A run already in --out is continued (--resume) or replaced (--overwrite), never overwritten unasked."""
    check_output_dir(args.out, "--out")
    if args.resume and args.overwrite:
        raise CLIError(f"{op}: --resume continues the run in --out and --overwrite replaces it; pass one")
    held = [name for name in held_files if os.path.exists(os.path.join(args.out, name))]
    if held and not (args.resume or args.overwrite):
        raise CLIError(f"{op}: --out {args.out} already holds a run ({', '.join(held)}); continue it with "
                       f"--resume, train into a new --out DIR, or replace it with --overwrite")


def remove_files(folder, names) -> None:
    """--overwrite: the earlier run's files go, so none of them can pass for the new run's."""
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            os.remove(path)


# ---------------------------------------------------------------- the files a command reads and writes
def check_input_file(path, what: str, hint: str = "") -> None:
    """A path the command reads must be an existing file, not a directory."""
    if os.path.isdir(path):
        raise CLIError(f"{what} {path} is a directory; expected a file")
    if not os.path.exists(path):
        raise CLIError(f"{what} {path} does not exist{hint}")


def check_output_dir(path, what: str) -> None:
    """A folder the command writes in may be missing (it is created), not a file."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"{what} {path} is a file; expected a directory (it is created if missing)")


@contextlib.contextmanager
def removed_if_left_empty(path):
    """The folders of `path` that this block creates are removed again if it fails before writing in them."""
    missing = []
    folder = os.path.abspath(path)
    while not os.path.exists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    try:
        yield
    except BaseException:
        for folder in missing:
            if os.path.isdir(folder) and not os.listdir(folder):
                os.rmdir(folder)
        raise


def toy_kernels():
    """The NumPy twins of the kernels unless TINYGRAD_LITE_BACKEND says otherwise: a toy model's
    step or one picture takes milliseconds, and Numba would spend seconds compiling for it first."""
    from . import kernels

    if os.environ.get(kernels.ENV_VAR):
        return contextlib.nullcontext()
    return kernels.use_backend("numpy")


# ---------------------------------------------------------------- the run
def run_command(args, command) -> int:
    """command(args) with --threads applied; an error is one line on stderr and exit 2 (--debug: the
    traceback), Ctrl-C exit 130, a closed pipe a quiet end. Under mpiexec a rank that leaves on its
    own stops every rank."""
    if not args.debug:  # NumPy's overflow warnings would bury the one-line error that explains them
        warnings.filterwarnings("ignore", category=RuntimeWarning,
                                message="(overflow|invalid value|divide by zero|underflow) encountered")
    try:
        from .memory import keep_freed_memory
        from .threads import default_num_threads, set_num_threads
        set_num_threads(getattr(args, "threads", None) or default_num_threads(1))
        keep_freed_memory()
        code = command(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:  # the reader closed the pipe (| head): end quietly, as Unix tools do
        silence_stdout()
        return 0
    except KeyboardInterrupt:  # (a Ctrl-C that every rank acted on returns 130 from the command)
        stop_every_rank(130, "interrupted")
        return 130
    except Exception as e:  # one line for the user; --debug for the traceback
        if args.debug and not distributed_run():
            raise
        if args.debug:
            traceback.print_exc()
        print(f"error: {message_for_user(e)}", file=sys.stderr)
        stop_every_rank(2, "the error above")
        return 2


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def distributed_run() -> bool:
    """Whether this process is one of several MPI ranks (mpiexec -n K ... train)."""
    distributed = sys.modules.get("tinygrad_lite.distributed")
    return distributed is not None and distributed.active()


def stop_every_rank(code: int, reason: str) -> None:
    """Data parallel: a rank that leaves on its own (an error, a Ctrl-C outside a step) stops every
    rank now (MPI_Abort), or the others would wait forever in their next collective. No-op in one
    process."""
    if distributed_run():
        sys.modules["tinygrad_lite.distributed"].abort(code, reason)
