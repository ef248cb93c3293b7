"""Find sentences of the source article (a Chinese beginner's guide to "Attention Is All You Need")
that appear verbatim in this repository. The project paraphrases the article; it never quotes it.

The article is not shipped, so this needs a local copy:

    python tests/article_overlap.py ARTICLE.txt [FILES...]     # default: every `git ls-files` file

Two checks, both with whitespace removed on both sides:
  * clauses: the article split at 。！？；，and newlines, each clause of >= MIN_CHARS characters
    that contains Chinese (formulas and code identifiers alone are kept on purpose);
  * CJK runs: every window of MIN_CHARS consecutive CJK characters of the article.
Exit status 1 when anything matches.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

MIN_CHARS = 12
CLAUSE_BREAK = re.compile(r"[。！？；，\n]")
CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
WHITESPACE = re.compile(r"\s+")


def squeeze(text: str) -> str:
    return WHITESPACE.sub("", text)


def clauses(article: str, min_chars: int = MIN_CHARS) -> set[str]:
    """The article's clauses of at least `min_chars` non-space characters that contain Chinese
    (clauses of only Latin letters, digits and symbols are its formulas and code identifiers,
    which the project keeps on purpose)."""
    return {c for c in (squeeze(part) for part in CLAUSE_BREAK.split(article))
            if len(c) >= min_chars and CJK_RUN.search(c)}


def cjk_windows(text: str, size: int = MIN_CHARS) -> set[str]:
    """Every run of `size` consecutive CJK characters in `text`."""
    return {run[i:i + size] for run in CJK_RUN.findall(text) for i in range(len(run) - size + 1)}


def overlaps(article: str, text: str, min_chars: int = MIN_CHARS) -> list[str]:
    """The article's clauses and CJK windows that occur in `text`, longest first."""
    flat = squeeze(text)
    hits = {c for c in clauses(article, min_chars) if c in flat}
    hits |= cjk_windows(article, min_chars) & cjk_windows(flat, min_chars)
    return sorted(hits, key=lambda s: (-len(s), s))


def repository_files(root: Path) -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return [root / n for n in names if (root / n).is_file()]


def scan(article: str, files) -> dict[str, list[str]]:
    """path -> verbatim pieces of the article found in that (text) file."""
    found = {}
    for path in files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        hits = overlaps(article, text)
        if hits:
            found[str(path)] = hits
    return found


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    article = Path(argv[0]).read_text(encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    files = [Path(f) for f in argv[1:]] or repository_files(root)
    found = scan(article, files)
    for path, hits in found.items():
        for hit in hits:
            print(f"{path}: {hit}")
    hits = sum(map(len, found.values()))
    print(f"{len(files)} files, {len(clauses(article))} clauses and {len(cjk_windows(article))} "
          f"{MIN_CHARS}-character CJK runs of the article: {hits} verbatim hits")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
