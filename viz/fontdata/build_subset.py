"""Rebuild TinygradLiteCJK-Regular.otf, the Chinese font shipped with viz (not imported by it).

    python viz/fontdata/build_subset.py NotoSansSC-Regular.otf [CORPUS.txt ...]

The source is Noto Sans SC 2.004 (SIL OFL 1.1; the pip package `pylopdf-fonts-zh-cn` ships
it). Kept: every character of GB2312 (its 6,763 hanzi, both levels, plus its punctuation,
kana, Greek, Cyrillic), ASCII and Latin-1, general and CJK punctuation, full-width forms, and
every character of the given corpus files (the built-in corpus, a Tatoeba export). Dropped:
vertical-writing, layout and hinting tables that matplotlib never reads. The family is renamed,
as the OFL asks of a modified version.
"""
from __future__ import annotations

import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

FAMILY = "TinygradLite CJK"
OUT = Path(__file__).with_name("TinygradLiteCJK-Regular.otf")
RANGES = ((0x20, 0x7E), (0xA0, 0xFF), (0x2000, 0x206F), (0x3000, 0x303F), (0xFF00, 0xFFEF))


def gb2312_characters() -> set[str]:
    """Every character GB2312 encodes (two-byte codes 0xA1A1..0xF7FE)."""
    found = set()
    for high in range(0xA1, 0xF8):
        for low in range(0xA1, 0xFF):
            try:
                found.add(bytes((high, low)).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    return found


def wanted_characters(corpus_files) -> set[str]:
    chars = gb2312_characters()
    chars.update(chr(code) for lo, hi in RANGES for code in range(lo, hi + 1))
    for name in corpus_files:
        chars.update(ch for ch in Path(name).read_text(encoding="utf-8") if ord(ch) >= 0x2E80)
    return chars


def rename(font: TTFont) -> None:
    postscript = FAMILY.replace(" ", "") + "-Regular"
    names = {1: FAMILY, 2: "Regular", 3: f"{postscript};subset of Noto Sans SC 2.004",
             4: f"{FAMILY} Regular", 6: postscript, 16: FAMILY, 17: "Regular"}
    table = font["name"]
    for record in list(table.names):
        if record.nameID in names or record.nameID in (18, 21, 22):
            table.removeNames(nameID=record.nameID)
    for name_id, text in names.items():
        table.setName(text, name_id, 3, 1, 0x409)
        table.setName(text, name_id, 1, 0, 0)
    font["CFF "].cff.fontNames = [postscript]


def main(argv) -> int:
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    source, corpus_files = argv[0], argv[1:]
    font = TTFont(source)
    cmap = font.getBestCmap()
    chars = sorted(ch for ch in wanted_characters(corpus_files) if ord(ch) in cmap)
    options = subset.Options()
    options.layout_features = ["kern", "liga", "locl"]
    options.drop_tables += ["VORG", "vhea", "vmtx", "BASE", "DSIG", "GSUB"]
    options.hinting = False
    options.name_IDs = ["*"]
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(ch) for ch in chars])
    subsetter.subset(font)
    rename(font)
    font.save(OUT)
    print(f"wrote {OUT}: {len(chars)} characters, {OUT.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
