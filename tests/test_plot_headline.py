"""bench/plot_headline.py reads bench/README.md's headline table and draws it."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("plot_headline", ROOT / "bench" / "plot_headline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_has_a_full_headline_table():
    machines, rows = load_script().read_table(ROOT / "bench" / "README.md")
    assert len(machines) >= 2
    labels = [label for label, _ in rows]
    assert any("training SMALL" in label for label in labels)
    assert any("decoding batch 64" in label for label in labels)
    for label, values in rows:
        assert len(values) == len(machines), label
        assert all(v is not None and v > 0 for v in values), (label, values)


def test_draws_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    script = load_script()
    page = tmp_path / "page.md"
    page.write_text("# x\n\n## Headline ratios\n\n| ratio | A | B |\n|---|---|---|\n| one | 1.5 | – |\n"
                    "| two | 0.9 | 1.1 |\n\ntext\n", encoding="utf-8")
    machines, rows = script.read_table(page)
    assert machines == ["A", "B"] and rows == [("one", [1.5, None]), ("two", [0.9, 1.1])]
    out = tmp_path / "h.png"
    script.draw(machines, rows, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_page_without_the_table_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# nothing here\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="Headline ratios"):
        load_script().read_table(page)
