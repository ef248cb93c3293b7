"""Read real Chinese–English sentence pairs from tab-separated files.

Two layouts are common: a plain ``zh<TAB>en`` TSV, and the Tatoeba/Anki export
(``English<TAB>Chinese<TAB>attribution``, as distributed for language learners). The
format is detected from which column holds Chinese characters, or given explicitly.

Real files have broken lines. Each one is reported with its line number and reason in
:attr:`LoadResult.bad_lines` instead of being dropped in silence; only a file with no
usable line at all is an error. Lines are decoded one by one, so stray bytes spoil only
their own line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

#: format name → (number of columns, index of the Chinese column, index of the English one)
FORMATS: dict[str, tuple[int, int, int]] = {
    "zh-en": (2, 0, 1),
    "en-zh": (2, 1, 0),
    "tatoeba": (3, 1, 0),
}

_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


def contains_cjk(text: str) -> bool:
    """True if ``text`` has at least one Chinese (Han) character."""
    return _CJK.search(text) is not None


class FormatNotDetected(ValueError):
    """No line tells which column is Chinese: the file's layout is none of FORMATS."""


@dataclass(frozen=True)
class LoadResult:
    """Pairs read from one file, plus every line that could not be used and why."""

    path: str
    format: str
    pairs: list[tuple[str, str]]
    bad_lines: list[tuple[int, str]]
    attributions: list[str] = field(default_factory=list)
    n_lines: int = 0

    def summary(self) -> str:
        """One paragraph for logs: counts and the first few bad lines."""
        text = f"{self.path}: {len(self.pairs)} pairs ({self.format}), {len(self.bad_lines)} bad lines"
        if self.bad_lines:
            shown = "; ".join(f"line {n}: {reason}" for n, reason in self.bad_lines[:5])
            more = f"; … {len(self.bad_lines) - 5} more" if len(self.bad_lines) > 5 else ""
            text += f" ({shown}{more})"
        return text


def _decoded_lines(path: str, data: bytes):
    """(line number, text or None, reason) for each line; the last newline ends no line."""
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    for lineno, raw in enumerate(raw_lines, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield lineno, None, f"not valid UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start})"
            continue
        if lineno == 1:
            text = text.removeprefix("\ufeff")
        yield lineno, text, ""


def _detect_format(path: str, lines) -> str:
    """The format most lines agree with: column count, and which column holds CJK."""
    votes = dict.fromkeys(FORMATS, 0)
    for _, text, _ in lines:
        if text is None:
            continue
        columns = text.split("\t")
        for name, (n_columns, zh_col, en_col) in FORMATS.items():
            if (len(columns) == n_columns and contains_cjk(columns[zh_col])
                    and not contains_cjk(columns[en_col])):
                votes[name] += 1
    best = max(votes, key=lambda name: votes[name])
    if votes[best] == 0:
        raise FormatNotDetected(
            f"load_pairs: cannot detect the format of {path!r}: no line has 2 or 3 "
            f"tab-separated columns with Chinese in exactly one of them; pass "
            f"fmt='zh-en', 'en-zh' or 'tatoeba'")
    return best


def _parse_line(text: str, n_columns: int, zh_col: int, en_col: int):
    """(zh, en, attribution) or a reason string why the line is unusable."""
    if not text.strip():
        return "blank line"
    columns = text.split("\t")
    if len(columns) != n_columns:
        return f"expected {n_columns} tab-separated columns, got {len(columns)}"
    zh, en = columns[zh_col].strip(), columns[en_col].strip()
    if not zh:
        return "empty Chinese side"
    if not en:
        return "empty English side"
    if not contains_cjk(zh):
        return f"Chinese column has no Chinese character: {zh[:40]!r}"
    attribution = columns[2].strip() if n_columns == 3 else ""
    return zh, en, attribution


def load_pairs(path, fmt: str = "auto") -> LoadResult:
    """Read (zh, en) pairs from ``path``.

    ``fmt`` is ``"auto"`` (detect), ``"zh-en"`` (2 columns, Chinese first), ``"en-zh"``
    (2 columns, English first) or ``"tatoeba"`` (English, Chinese, attribution).
    Raises FileNotFoundError for a missing file and ValueError for an empty file or one
    whose every line is bad.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"load_pairs: fmt must be 'auto' or one of {sorted(FORMATS)}, got {fmt!r}")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_pairs: no such file: {path!r}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"load_pairs: expected a file, got the directory {path!r}")
    with open(path, "rb") as handle:
        data = handle.read()
    if not data.strip():
        raise ValueError(f"load_pairs: {path!r} is empty; expected tab-separated sentence pairs")

    lines = list(_decoded_lines(path, data))
    name = _detect_format(path, lines) if fmt == "auto" else fmt
    n_columns, zh_col, en_col = FORMATS[name]
    pairs: list[tuple[str, str]] = []
    attributions: list[str] = []
    bad_lines: list[tuple[int, str]] = []
    for lineno, text, reason in lines:
        parsed = reason if text is None else _parse_line(text, n_columns, zh_col, en_col)
        if isinstance(parsed, str):
            bad_lines.append((lineno, parsed))
            continue
        zh, en, attribution = parsed
        pairs.append((zh, en))
        attributions.append(attribution)
    if not pairs:
        shown = "; ".join(f"line {n}: {reason}" for n, reason in bad_lines[:3])
        raise ValueError(f"load_pairs: no usable line in {path!r} read as {name!r}: all "
                         f"{len(bad_lines)} lines are bad ({shown})")
    return LoadResult(path, name, pairs, bad_lines, attributions, len(lines))
