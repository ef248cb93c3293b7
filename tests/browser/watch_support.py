"""Starting a real training run with --explore and finding its live page (the browser test and
docs/screenshot_watch.py share it)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--max-tokens", "600"]


def start_explore_run(out, *flags, backend: str = "numpy") -> tuple[subprocess.Popen, str]:
    """`python -m transformer train --explore --port 0 --out OUT FLAGS...` and the URL it prints."""
    env = {**os.environ, "TINYGRAD_LITE_BACKEND": backend, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "train", "--explore", "--port", "0",
                             "--out", str(out), "--no-progress", *map(str, flags)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("live page: "):
            return proc, line.split()[2]
    proc.kill()
    raise RuntimeError(f"train --explore printed no URL: {proc.stderr.read()}")
