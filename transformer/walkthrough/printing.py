"""How the walkthrough prints a claim: a heading naming the article's section, the claim in our
words, ✓/✗ checks against the article's printed numbers, ⚠ precision notes; and where its
figures go."""
from __future__ import annotations

from pathlib import Path

import numpy as np

FIGURE_NAMES = {
    "descent": "gradient_descent.png",
    "attention": "attention_6_tokens.png",
    "temperature": "softmax_temperature.png",
    "pe": "positional_encoding.png",
}


class Tally:
    """How many ✓ and ✗ the run printed."""
    passed = 0
    failed = 0


def heading(number: int, zh: str, en: str, source: str) -> None:
    """A section title; `source` is the article's section (its heading) the claims come from."""
    print(f"\n§{number} {zh} · {en}   [文章小节 article section: {source}]")
    print("─" * 72)


def claim(zh: str, en: str) -> None:
    """One claim of the article, restated in our words: what the checks below test."""
    print(f"  论点（转述） {zh}\n       claim (paraphrased): {en}")


def show(label: str, value="") -> None:
    print(f"  · {label}: {value}" if value != "" else f"  · {label}")


def check(label: str, ours, article, ok: bool) -> bool:
    ok = bool(ok)
    if ok:
        Tally.passed += 1
    else:
        Tally.failed += 1
    print(f"  {'✓' if ok else '✗'} {label}: ours {ours}  |  article {article}")
    return ok


def note(zh: str, en: str) -> None:
    print(f"  ⚠ 精确说明: {zh}\n       precision note: {en}")


def fmt(values, digits: int = 4) -> str:
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in np.ravel(values)) + "]"


def matrix_lines(m: np.ndarray, digits: int = 2, width: int = 7) -> None:
    for row in np.asarray(m):
        print("      " + "".join(f"{v:>{width}.{digits}f}" if np.isfinite(v)
                                  else f"{'-inf':>{width}}" for v in row))


def matches_printed(value: float, printed: str) -> bool:
    """True when `value` rounds to the article's `printed` number at its own precision."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(value) - float(printed)) <= 0.5 * 10.0 ** -decimals + 1e-12


class Figures:
    """Where the pictures go and what draws them. `plots` is a module with viz.plots' functions
    (plot_descent_path, plot_attention, plot_softmax_temperatures, plot_positional_encoding),
    passed in by the caller because `transformer` does not import `viz`."""

    def __init__(self, directory, plots):
        self.directory, self.plots = Path(directory), plots

    def draw(self, name: str, function: str, *args, **kwargs) -> Path:
        """Call plots.<function>(*args, out=<directory>/<name>, **kwargs); returns the path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / name
        getattr(self.plots, function)(*args, out=path, **kwargs)
        print(f"  ↳ figure: {path}")
        return path
