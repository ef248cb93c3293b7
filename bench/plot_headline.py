"""Draw bench/headline.png: the headline ratios of bench/README.md, one bar per machine.

The numbers are read from the page's table under "## Headline ratios", so the picture can only
show what the page says. Above 1: tinygrad-lite is faster.

    python3 bench/plot_headline.py [--page bench/README.md] [--out bench/headline.png]
"""
import argparse
import re
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADING = "## Headline ratios"


def read_table(page: Path):
    """(machines, rows): the column titles and (label, [ratio or None per machine]) of the table
    that follows HEADING."""
    lines = page.read_text(encoding="utf-8").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(HEADING))
    except StopIteration:
        raise SystemExit(f"plot_headline: no heading starting {HEADING!r} in {page}") from None
    table = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif table:
            break
    if len(table) < 3:
        raise SystemExit(f"plot_headline: expected a table with a header and rows after {HEADING!r} in {page}")
    machines = table[0][1:]
    rows = [(cells[0], [_number(cell) for cell in cells[1:]]) for cells in table[2:]]
    return machines, rows


def _number(cell: str):
    match = re.search(r"\d+(\.\d+)?", cell)
    return float(match.group()) if match else None


def draw(machines, rows, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / len(machines)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for m, machine in enumerate(machines):
        xs = [r + (m - (len(machines) - 1) / 2) * width for r, (_, values) in enumerate(rows) if values[m] is not None]
        ys = [values[m] for _, values in rows if values[m] is not None]
        bars = ax.bar(xs, ys, width, label=machine)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)), [textwrap.fill(label, 18, break_on_hyphens=False) for label, _ in rows], fontsize=8)
    ax.set_ylabel("ours / theirs (above 1: we are faster)")
    ax.set_title("tinygrad-lite against PyTorch (training) and CTranslate2 (decoding), 1 thread")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, default=HERE / "README.md", help="the page to read the table from")
    parser.add_argument("--out", type=Path, default=HERE / "headline.png", help="PNG path")
    args = parser.parse_args()
    draw(*read_table(args.page), args.out)


if __name__ == "__main__":
    main()
