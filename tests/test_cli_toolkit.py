"""The three command lines share one toolkit (tinygrad_lite/cli.py, issue 46): a flag is spelt out
in full in every one of them and a misspelt one is answered with the flag it may have meant, by
the subcommand it was given to; `python -m transformer gpt` is a subcommand of the same parser;
and --minutes 0 means "no limit" in every trainer."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import transformer.__main__ as transformer_cli
import transformer.gpt.__main__ as gpt_cli
import viz.__main__ as viz_cli

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--max-tokens", "600"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("main, argv, prog, meant", [
    (transformer_cli.main, ["train", "--max-step", "1"], "python -m transformer train", "--max-steps"),
    (transformer_cli.main, ["translate", "--temp", "2", "我"], "python -m transformer translate", "--temperature"),
    (transformer_cli.main, ["gpt", "train", "--max-iter", "1"], "python -m transformer gpt train", "--max-iters"),
    (transformer_cli.main, ["gpt", "sample", "--max-new", "1"], "python -m transformer gpt sample",
     "--max-new-tokens"),
    (gpt_cli.main, ["train", "--n_lay=2"], "python -m transformer gpt train", "--n-layer"),
    (viz_cli.main, ["xor", "--out", "OUT/x.svg", "--hid", "3"], "python -m viz xor", "--hidden"),
    (viz_cli.main, ["attention", "--checkpoint", "c", "--out", "OUT/a.png", "--kin", "cross", "我"],
     "python -m viz attention", "--kind"),
], ids=["train", "translate", "gpt-train", "gpt-sample", "gpt-alone", "viz-xor", "viz-attention"])
def test_an_abbreviated_flag_is_one_line_naming_the_flag_meant(main, argv, prog, meant, tmp_path, capsys):
    """No CLI takes a prefix for a flag (`--max-step` for `--max-steps`): it is one line, exit 2,
    from the subcommand it was given to, saying which flag was meant; nothing is written."""
    argv = [a.replace("OUT", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"error: {prog}: unrecognized arguments"), err
    assert f"(did you mean {meant}?)" in err
    assert not any(tmp_path.iterdir())


def test_gpt_is_a_subcommand_of_the_translators_parser():
    """`python -m transformer gpt ...` is read by one parser: the GPT's flags, in nanoGPT's spelling
    too, land in the same namespace as the global ones, with the GPT CLI's handler."""
    args = transformer_cli.parse(["--threads", "2", "gpt", "train", "--n_layer=3", "--bias=False", "--debug"])
    standalone = gpt_cli.build_parser().parse_args(["train", "--n_layer=3", "--bias=False"])
    assert (args.threads, args.debug, args.n_layer, args.bias) == (2, True, 3, False)
    assert args.run is standalone.run and args.run.__module__ == "transformer.gpt.cli"


def test_minutes_zero_means_no_limit_in_the_translators_train(tmp_path):
    """`train --minutes 0` runs (as `gpt train --minutes 0` does) and records no time limit."""
    run = subprocess.run([sys.executable, "-m", "transformer", "train", "--out", str(tmp_path), "--minutes", "0",
                          "--max-steps", "2", "--no-progress", "--eval-every", "0", *TINY], cwd=ROOT, env=ENV,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "done: 2 steps" in run.stdout
    steps = [json.loads(line).get("step") for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == 2
    from tinygrad_lite import checkpoint
    _, meta = checkpoint.load(tmp_path / "checkpoint.safetensors")
    assert meta["train"]["train_config"]["minutes"] is None


def test_minutes_zero_is_no_limit_in_both_trainers_configs():
    """The same flag, the same meaning: 0 reaches each trainer's config as None (no limit)."""
    translator = transformer_cli.parse(["train", "--minutes", "0"])
    gpt = transformer_cli.parse(["gpt", "train", "--minutes", "0"])
    assert transformer_cli.train_overrides(translator)["minutes"] is None
    from transformer.gpt.cli import config_overrides
    assert config_overrides(gpt)["minutes"] is None
