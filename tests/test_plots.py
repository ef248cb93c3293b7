"""viz.plots and viz.fonts: every plot writes a real, non-blank file; bad input fails clearly;
Chinese tokens survive with or without an installed CJK font."""

import io
import json
import math
import os
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from matplotlib import font_manager
from matplotlib import image as mpimg
from matplotlib.text import Text

from viz import fonts, plots

DPI = 80
SOURCE = list("这是一个苹果")
TARGET = ["This", "is", "an", "apple"]


# ---------------------------------------------------------------- helpers and fixtures


def make_font(path, chars, family="Tiny CJK Test"):
    """A real TrueType font whose cmap maps `chars` (and space) to filled boxes."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    names = {ord(ch): f"uni{ord(ch):04X}" for ch in chars}
    order = [".notdef", "space", *names.values()]

    def box():
        pen = TTGlyphPen(None)
        pen.moveTo((100, 0))
        pen.lineTo((100, 800))
        pen.lineTo((900, 800))
        pen.lineTo((900, 0))
        pen.closePath()
        return pen.glyph()

    builder = FontBuilder(1000, isTTF=True)
    builder.setupGlyphOrder(order)
    builder.setupCharacterMap({32: "space", **names})
    builder.setupGlyf(
        {
            name: (TTGlyphPen(None).glyph() if name in (".notdef", "space") else box())
            for name in order
        }
    )
    builder.setupHorizontalMetrics({name: (1000, 0) for name in order})
    builder.setupHorizontalHeader(ascent=880, descent=-120)
    builder.setupNameTable({"familyName": family, "styleName": "Regular"})
    builder.setupOS2(sTypoAscender=880, sTypoDescender=-120, usWinAscent=880, usWinDescent=120)
    builder.setupPost()
    builder.save(str(path))
    return str(path)


class Entry:
    """Stand-in for matplotlib's FontEntry."""

    def __init__(self, name, fname, index=0):
        self.name, self.fname, self.index = name, fname, index


def entry_named(prefix):
    return next(e for e in font_manager.fontManager.ttflist if e.name.startswith(prefix))


@pytest.fixture
def no_cjk_font(monkeypatch):
    monkeypatch.setattr(fonts, "find_cjk_font", lambda *args, **kwargs: None)


@pytest.fixture
def tiny_cjk_font(monkeypatch, tmp_path):
    chars = "".join(SOURCE) + "香蕉"
    font = fonts.CJKFont("Tiny CJK Test", make_font(tmp_path / "tiny-cjk.ttf", chars))
    monkeypatch.setattr(fonts, "find_cjk_font", lambda *args, **kwargs: font)
    return font


def assert_real_png(path, min_side=80):
    assert path.is_file()
    pixels = mpimg.imread(path)
    height, width = pixels.shape[:2]
    assert min_side <= height <= 4000 and min_side <= width <= 4000
    assert pixels[..., :3].std() > 0.02, "image is blank"


def texts_of(figure):
    return [text.get_text() for text in figure.findobj(Text) if text.get_text()]


def svg_texts(path):
    root = ET.parse(path).getroot()
    return ["".join(node.itertext()) for node in root.iter("{http://www.w3.org/2000/svg}text")]


def attention_weights(shape, seed=0):
    scores = np.random.default_rng(seed).normal(size=shape)
    exp = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------- fonts


def test_needs_cjk_font_detects_cjk_only():
    assert fonts.needs_cjk_font("苹")
    assert fonts.needs_cjk_font("an 苹果 apple")
    assert fonts.needs_cjk_font("こんにちは")
    assert not fonts.needs_cjk_font("apple")
    assert not fonts.needs_cjk_font("café √dₖ")


def test_font_covers_reads_the_real_cmap(tmp_path):
    tiny = make_font(tmp_path / "t.ttf", "苹果")
    assert fonts.font_covers(tiny, "苹果")
    assert not fonts.font_covers(tiny, "香")
    assert not fonts.font_covers(entry_named("DejaVu Sans").fname, "苹")
    junk = tmp_path / "junk.ttf"
    junk.write_bytes(b"not a font")
    assert not fonts.font_covers(str(junk), "苹")


def test_find_cjk_font_picks_a_covering_font_and_skips_placeholders(tmp_path):
    dejavu = entry_named("DejaVu Sans")
    tiny = Entry("Tiny CJK Test", make_font(tmp_path / "t.ttf", fonts.CJK_PROBE))
    assert fonts.find_cjk_font([dejavu]) is None
    assert fonts.find_cjk_font([dejavu, tiny]) == fonts.CJKFont("Tiny CJK Test", tiny.fname)
    last_resort = [e for e in font_manager.fontManager.ttflist if "Last Resort" in e.name]
    if last_resort:
        assert fonts.font_covers(last_resort[0].fname, fonts.CJK_PROBE)
        assert fonts.find_cjk_font(last_resort) is None


def test_find_cjk_font_prefers_known_cjk_families():
    entries = [Entry("Some Font", "/a.ttf"), Entry("Noto Sans CJK SC", "/b.ttc", 2)]
    found = fonts.find_cjk_font(entries, covers=lambda path, text, index: True)
    assert found == fonts.CJKFont("Noto Sans CJK SC", "/b.ttc", 2)
    nothing = fonts.find_cjk_font(entries, covers=lambda path, text, index: False)
    assert nothing is None


def test_installed_cjk_font_if_any_really_covers_chinese():
    found = fonts.find_cjk_font()
    if found is None:
        pytest.skip("no CJK font installed (e.g. apt-get install fonts-wqy-microhei)")
    assert "Last Resort" not in found.name
    assert fonts.font_covers(found.path, "这是一个苹果", found.index)


# ---------------------------------------------------------------- the bundled font


@pytest.fixture
def no_system_cjk_font(monkeypatch):
    """The default search as on a machine with no CJK font installed (the pip-only case)."""
    monkeypatch.delenv(fonts.FONT_ENV, raising=False)
    monkeypatch.setattr(fonts, "_installed_cjk_font", lambda: None)


@pytest.fixture
def no_bundled_font(monkeypatch, tmp_path, no_system_cjk_font):
    """As if the package had been installed without its font file."""
    monkeypatch.setattr(fonts, "BUNDLED_FONT_PATH", str(tmp_path / "missing.otf"))
    fonts.bundled_cjk_font.cache_clear()
    yield
    fonts.bundled_cjk_font.cache_clear()


def glyph_pixels(text, properties):
    """The ink of `text` drawn alone at 40 pt with `properties`, as a grey-level array."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(0.8, 0.8), dpi=100)
    FigureCanvasAgg(figure)
    figure.text(0.5, 0.5, text, fontproperties=properties, size=40, ha="center", va="center")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font")
        figure.canvas.draw()
    return 255 - np.asarray(figure.canvas.buffer_rgba())[..., 0].astype(int)


def test_glyph_check_detects_missing_glyph_boxes():
    """The check below can fail: without CJK glyphs, every character is the same box."""
    dejavu = font_manager.FontProperties(family="DejaVu Sans")
    assert np.array_equal(glyph_pixels("苹", dejavu), glyph_pixels("果", dejavu))
    assert not np.array_equal(glyph_pixels("a", dejavu), glyph_pixels("b", dejavu))


@pytest.mark.parametrize("suffix", [".png", ".pdf", ".svg"])
def test_attention_labels_draw_real_chinese_glyphs_with_no_cjk_font_installed(
    tmp_path, no_system_cjk_font, suffix
):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = plots.plot_attention(
            attention_weights((6, 4)),
            TARGET,
            SOURCE,
            out=tmp_path / f"a{suffix}",
            kind="cross-attention",
            title="这是一个苹果",
            dpi=DPI,
        )
    labels = {label.get_text(): label for label in result.figure.axes[0].get_yticklabels()}
    assert set(labels) == set(SOURCE)
    resolved = {font_manager.findfont(label.get_fontproperties()) for label in labels.values()}
    assert resolved == {fonts.BUNDLED_FONT_PATH}
    title = next(t for t in result.figure.findobj(Text) if "苹果" in t.get_text())
    assert font_manager.findfont(title.get_fontproperties()) == fonts.BUNDLED_FONT_PATH
    drawn = {ch: glyph_pixels(ch, labels[ch].get_fontproperties()) for ch in SOURCE}
    for ch, pixels in drawn.items():
        assert pixels.max() > 100, f"{ch!r} drew no ink"
    distinct = {pixels.tobytes() for pixels in drawn.values()}
    assert len(distinct) == len(SOURCE), "some characters drew the same missing-glyph box"


def test_bundled_font_covers_gb2312_and_the_corpus():
    from transformer.data import builtin_corpus

    font = fonts.bundled_cjk_font()
    assert font is not None and font.name == fonts.BUNDLED_FONT_FAMILY
    assert os.path.getsize(font.path) < 3_000_000
    level_1 = "".join(
        bytes((high, low)).decode("gb2312")
        for high in range(0xB0, 0xD8)
        for low in range(0xA1, 0xFF)
        if (high, low) <= (0xD7, 0xF9)
    )
    assert len(level_1) == 3755
    corpus = {ch for pairs in builtin_corpus().values() for zh, _ in pairs for ch in zh}
    punctuation = "，。？！：；、“”‘’（）《》…—·～"
    for text in (level_1, "".join(sorted(corpus)), punctuation, "abc XYZ 0123 -> <eos>"):
        assert fonts.uncovered_characters(font, text) == ""
    assert fonts.uncovered_characters(font, "苹果🍎") == "🍎"
    licence = Path(font.path).with_name("OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Noto Sans SC" in licence


def test_font_env_var_chooses_the_font(monkeypatch, tmp_path):
    tiny = make_font(tmp_path / "tiny.ttf", "苹果")
    for value, expected in [("none", None), ("bundled", fonts.BUNDLED_FONT_PATH), (tiny, tiny)]:
        monkeypatch.setenv(fonts.FONT_ENV, value)
        found = fonts.find_cjk_font()
        assert (found and found.path) == expected
    monkeypatch.setenv(fonts.FONT_ENV, str(tmp_path / "nope.ttf"))
    with pytest.raises(FileNotFoundError, match="TINYGRAD_LITE_CJK_FONT=.*nope.ttf"):
        fonts.find_cjk_font()
    monkeypatch.setenv(fonts.FONT_ENV, entry_named("DejaVu Sans").fname)
    with pytest.raises(ValueError, match="no Chinese glyphs"):
        fonts.find_cjk_font()


def test_missing_font_warning_names_the_chinese_text_not_the_title(tmp_path, no_bundled_font):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plots.plot_attention(
            attention_weights((4, 4)),
            TARGET,
            out=tmp_path / "dec.png",
            kind="decoder self-attention",
            title="这是一个苹果",
            dpi=DPI,
        )
    messages = [str(w.message) for w in caught if w.category is plots.MissingCJKFontWarning]
    assert len(messages) == 1, [str(w.message) for w in caught]
    assert "'这是一个苹果'" in messages[0] and "decoder" not in messages[0]
    assert "missing.otf" in messages[0] and "reinstall" in messages[0]


def test_characters_the_font_lacks_are_named(tmp_path, tiny_cjk_font):
    with pytest.warns(plots.MissingCJKFontWarning, match="no glyph for '猫狗'"):
        plots.plot_attention(attention_weights((4, 4)), list("猫狗苹果"), out=tmp_path / "a.png")


# ---------------------------------------------------------------- attention


@pytest.mark.parametrize("shape", [(2, 3, 4, 6), (3, 4, 6), (4, 6)])
def test_plot_attention_puts_queries_on_y_and_keys_on_x(tmp_path, shape, no_cjk_font):
    weights = attention_weights(shape)
    with pytest.warns(plots.MissingCJKFontWarning):
        result = plots.plot_attention(
            weights, SOURCE, TARGET, out=tmp_path / "att.png", kind="cross-attention", dpi=DPI
        )
    assert_real_png(result.path)
    grid = weights.reshape((1,) * (4 - len(shape)) + shape)
    n_layers, n_heads = grid.shape[:2]
    axes = [ax for ax in result.figure.axes if ax.images]
    assert len(axes) == n_layers * n_heads
    for index, ax in enumerate(axes):
        np.testing.assert_array_equal(
            ax.images[0].get_array(), grid[index // n_heads, index % n_heads]
        )
    bottom_left = axes[(n_layers - 1) * n_heads]
    assert [t.get_text() for t in bottom_left.get_xticklabels()] == SOURCE
    assert [t.get_text() for t in bottom_left.get_yticklabels()] == TARGET
    assert any("cross-attention" in text for text in texts_of(result.figure))


def test_plot_attention_self_attention_uses_src_tokens_for_both_axes(tmp_path, no_cjk_font):
    result = plots.plot_attention(
        attention_weights((2, 6, 6)),
        SOURCE,
        out=tmp_path / "self.svg",
        dpi=DPI,
        kind="encoder self-attention",
        title="这是一个苹果",
    )
    assert result.data["queries"] == result.data["keys"] == SOURCE
    assert any("encoder self-attention" in text for text in texts_of(result.figure))


def test_svg_keeps_chinese_tokens_as_text_without_cjk_font(tmp_path, no_cjk_font):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = plots.plot_attention(
            attention_weights((6, 6)), SOURCE, out=tmp_path / "self.svg", dpi=DPI
        )
    texts = svg_texts(result.path)
    assert "苹" in texts
    assert set(SOURCE) <= set(texts)


def test_png_without_cjk_font_warns_once_with_the_fix(tmp_path, no_cjk_font):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plots.plot_attention(attention_weights((6, 6)), SOURCE, out=tmp_path / "a.png", dpi=DPI)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert issubclass(caught[0].category, plots.MissingCJKFontWarning)
    assert "fonts-wqy-microhei" in messages[0] and ".svg" in messages[0]
    assert caught[0].filename == __file__


@pytest.mark.parametrize("suffix", [".png", ".pdf", ".svg"])
def test_cjk_font_is_used_for_chinese_labels(tmp_path, tiny_cjk_font, suffix):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = plots.plot_attention(
            attention_weights((6, 4)), TARGET, SOURCE, out=tmp_path / f"a{suffix}", dpi=DPI
        )
    ax = result.figure.axes[0]
    for label in ax.get_yticklabels():
        assert label.get_fontproperties().get_file() == tiny_cjk_font.path
    for label in ax.get_xticklabels():
        assert label.get_fontproperties().get_file() is None
    assert result.path.stat().st_size > 0
    if suffix == ".png":
        assert_real_png(result.path)


def test_plot_attention_rejects_mismatched_shapes(tmp_path):
    out = tmp_path / "a.png"
    with pytest.raises(ValueError, match=r"T_k=5 .*src_tokens has 6"):
        plots.plot_attention(attention_weights((6, 5)), SOURCE, out=out)
    with pytest.raises(ValueError, match=r"T_q=3 .*tgt_tokens has 4"):
        plots.plot_attention(attention_weights((3, 6)), SOURCE, TARGET, out=out)
    with pytest.raises(ValueError, match=r"\(L, h, T_q, T_k\).*\(1, 1, 1, 6, 6\)"):
        plots.plot_attention(np.ones((1, 1, 1, 6, 6)), SOURCE, out=out)
    with pytest.raises(ValueError, match="2 layer_names for 1 layers"):
        plots.plot_attention(np.ones((1, 2, 6, 6)), SOURCE, out=out, layer_names=["a", "b"])
    with pytest.raises(ValueError, match="NaN or infinite"):
        plots.plot_attention(np.full((6, 6), np.nan), SOURCE, out=out)
    with pytest.raises(TypeError, match="list of token strings"):
        plots.plot_attention(np.ones((6, 6)), "这是一个苹果", out=out)
    assert not out.exists()


def suptitles(figure):
    """The suptitle of the figure and of each subfigure, top to bottom."""
    found = [figure._suptitle.get_text()] if figure._suptitle is not None else []
    return found + [sub._suptitle.get_text() for sub in figure.subfigs if sub._suptitle is not None]


def test_attention_title_names_the_kind_once(tmp_path):
    weights, out = attention_weights((6, 6)), tmp_path / "a.svg"
    plain = plots.plot_attention(weights, SOURCE, out=out, kind="encoder self-attention",
                                 title="这是一个苹果")
    assert suptitles(plain.figure) == ["encoder self-attention — 这是一个苹果"]
    named = plots.plot_attention(weights, SOURCE, out=out, kind="encoder self-attention",
                                 title="Encoder self-attention: 这是一个苹果")
    assert suptitles(named.figure) == ["Encoder self-attention: 这是一个苹果"]


def translator_maps(n_layers=2, n_heads=3):
    """What Translator.attention_maps returns for 这是一个苹果 -> this is an apple."""
    src, tgt = [*SOURCE, "<eos>"], ["<bos>", *TARGET]
    return {
        "cross-attention": (attention_weights((n_layers, n_heads, 5, 7), 1), tgt, src),
        "encoder self-attention": (attention_weights((n_layers, n_heads, 7, 7), 2), src, src),
        "decoder self-attention": (attention_weights((n_layers, n_heads, 5, 5), 3), tgt, tgt),
    }


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_plot_attention_maps_puts_every_kind_in_one_figure(tmp_path, suffix):
    maps = translator_maps()
    out = tmp_path / f"attn{suffix}"
    result = plots.plot_attention_maps(maps, out, title="这是一个苹果 → this is an apple", dpi=DPI)
    assert [p.name for p in tmp_path.iterdir()] == [out.name] and result.path == out
    kinds = ["encoder self-attention", "decoder self-attention", "cross-attention"]
    assert result.data["kinds"] == kinds
    assert suptitles(result.figure) == ["这是一个苹果 → this is an apple", *kinds]
    for section, kind in zip(result.figure.subfigs, kinds):
        weights, queries, keys = maps[kind]
        heatmaps = [ax for ax in section.axes if ax.images]
        assert len(heatmaps) == 2 * 3
        np.testing.assert_array_equal(heatmaps[0].images[0].get_array(), weights[0, 0])
        assert [t.get_text() for t in heatmaps[0].get_yticklabels()] == queries
        assert [t.get_text() for t in heatmaps[-1].get_xticklabels()] == keys
    if suffix == ".png":
        assert_real_png(out)


def test_plot_attention_maps_kinds_and_bad_input(tmp_path):
    maps, out = translator_maps(1, 2), tmp_path / "a.png"
    one = plots.plot_attention_maps(maps, out, kinds=["cross-attention"], dpi=DPI)
    assert suptitles(one.figure) == ["cross-attention"]
    with pytest.raises(ValueError, match=r"kinds \['encoder'\] not in maps"):
        plots.plot_attention_maps(maps, out, kinds=["encoder"])
    with pytest.raises(TypeError, match="non-empty dict kind"):
        plots.plot_attention_maps({}, out)
    bad = {"cross-attention": (attention_weights((1, 2, 5, 6)), ["<bos>", *TARGET], SOURCE[:5])}
    with pytest.raises(ValueError, match="T_k=6 .*src_tokens has 5"):
        plots.plot_attention_maps(bad, tmp_path / "bad.png")
    assert not (tmp_path / "bad.png").exists()


# ---------------------------------------------------------------- output handling


@pytest.mark.parametrize("name", ["a.jpg", "a.PNGX", "noextension"])
def test_unknown_extension_names_it_and_the_allowed_ones(tmp_path, name):
    with pytest.raises(ValueError, match=r"\.png, \.svg, \.pdf") as error:
        plots.plot_softmax_temperatures(out=tmp_path / name)
    suffix = os.path.splitext(name)[1]
    assert (repr(suffix) if suffix else "no extension") in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_without_out_nothing_is_written_and_the_result_shows_inline(
    tmp_path, monkeypatch, no_system_cjk_font
):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = plots.plot_attention(attention_weights((6, 6)), SOURCE, dpi=DPI)
        png = result._repr_png_()
    assert result.path is None and list(tmp_path.iterdir()) == []
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    pixels = mpimg.imread(io.BytesIO(png), format="png")
    assert pixels.shape[:2] == tuple(int(v) for v in result.figure.bbox.size[::-1])
    assert pixels[..., :3].std() > 0.02
    label = result.figure.axes[0].get_yticklabels()[0]
    assert font_manager.findfont(label.get_fontproperties()) == fonts.BUNDLED_FONT_PATH
    with pytest.raises(TypeError, match="out must be a str or path"):
        plots.plot_softmax_temperatures(out=3)
    ipython = pytest.importorskip("IPython.core.formatters")
    assert ipython.PNGFormatter()(result).startswith(b"\x89PNG")


def test_unwritable_directory_error_names_the_path(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    target = blocker / "sub" / "plot.png"
    with pytest.raises(OSError, match="a_file. is a file, not a directory") as error:
        plots.plot_softmax_temperatures(out=target, dpi=DPI)
    assert str(blocker / "sub") in str(error.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory_error_names_the_path(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(PermissionError, match=str(locked)):
        plots.plot_softmax_temperatures(out=locked / "plot.png", dpi=DPI)


def test_parent_dirs_created_and_write_is_atomic(tmp_path, monkeypatch):
    target = tmp_path / "deep" / "er" / "soft.pdf"
    result = plots.plot_softmax_temperatures(out=target, dpi=DPI)
    assert result.path == target
    assert target.read_bytes().startswith(b"%PDF")
    assert os.listdir(target.parent) == ["soft.pdf"]

    before = target.read_bytes()

    def broken_savefig(self, *args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(plots.Figure, "savefig", broken_savefig)
    with pytest.raises(RuntimeError, match="disk on fire"):
        plots.plot_softmax_temperatures(out=target, dpi=DPI)
    assert target.read_bytes() == before
    assert os.listdir(target.parent) == ["soft.pdf"]


def test_figures_do_not_touch_pyplot(tmp_path):
    import matplotlib.pyplot as plt

    open_before = plt.get_fignums()
    plots.plot_softmax_temperatures(out=tmp_path / "s.png", dpi=DPI)
    assert plt.get_fignums() == open_before


# ---------------------------------------------------------------- softmax temperature


def reference_softmax(values, temperature):
    exps = [math.exp((v - max(values)) / temperature) for v in values]
    return [e / sum(exps) for e in exps]


def test_softmax_temperature_matches_the_article(tmp_path):
    result = plots.plot_softmax_temperatures(out=tmp_path / "soft.png", dpi=DPI)
    assert_real_png(result.path)
    logits = [3, 5, -10, 20]
    at_ten = result.data["probabilities"][result.data["temperatures"].index(10)]
    np.testing.assert_allclose(np.round(at_ten, 4), [0.1255, 0.1533, 0.0342, 0.6870])
    expected_labels = set()
    for row, temperature in enumerate((1, 10)):
        expected = reference_softmax(logits, temperature)
        np.testing.assert_allclose(result.data["probabilities"][row], expected, rtol=1e-12)
        labels = [f"{p:.4f}" for p in expected]
        assert result.data["annotations"][row] == labels
        expected_labels.update(labels)
    drawn = set(texts_of(result.figure))
    assert expected_labels <= drawn


def test_softmax_with_temperature_is_stable_and_validated():
    big = plots.softmax_with_temperature([1000.0, 1001.0, 999.0], 0.5)
    np.testing.assert_allclose(big, reference_softmax([1000.0, 1001.0, 999.0], 0.5), rtol=1e-12)
    np.testing.assert_allclose(plots.softmax_with_temperature([[1, 2], [3, 3]]).sum(-1), 1.0)
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="temperature must be finite and > 0"):
            plots.softmax_with_temperature([1, 2], bad)
    with pytest.raises(TypeError, match="temperature must be a number"):
        plots.softmax_with_temperature([1, 2], "hot")


def test_softmax_with_temperature_matches_torch():
    torch = pytest.importorskip("torch")
    logits = np.random.default_rng(3).normal(size=(4, 7)) * 10
    for temperature in (0.3, 1.0, 10.0):
        expected = torch.softmax(torch.tensor(logits) / temperature, dim=-1).numpy()
        np.testing.assert_allclose(
            plots.softmax_with_temperature(logits, temperature), expected, rtol=1e-12, atol=1e-15
        )


def test_plot_softmax_temperatures_rejects_bad_temperatures(tmp_path):
    with pytest.raises(ValueError, match="temperature"):
        plots.plot_softmax_temperatures(temperatures=(1, 0), out=tmp_path / "s.png")
    with pytest.raises(ValueError, match="at least one"):
        plots.plot_softmax_temperatures(temperatures=(), out=tmp_path / "s.png")


# ---------------------------------------------------------------- positional encoding


def sinusoidal(max_len, d_model):
    position = np.arange(max_len)[:, None]
    dims = np.arange(d_model)[None, :]
    angle = position / np.power(10000.0, (dims - dims % 2) / d_model)
    return np.where(dims % 2 == 0, np.sin(angle), np.cos(angle))


def test_plot_positional_encoding(tmp_path):
    pe = sinusoidal(40, 32)
    result = plots.plot_positional_encoding(pe[None], tmp_path / "pe.png", dpi=DPI)
    assert_real_png(result.path)
    np.testing.assert_array_equal(result.data["pe"], pe)
    heatmap = next(ax for ax in result.figure.axes if ax.images)
    np.testing.assert_array_equal(heatmap.images[0].get_array(), pe)
    assert len(result.figure.axes) == 2, "expected the heatmap and its colorbar"
    with pytest.raises(ValueError, match=r"\(max_len, d_model\).*\(2, 3, 4\)"):
        plots.plot_positional_encoding(np.ones((2, 3, 4)), tmp_path / "pe.png")


# ---------------------------------------------------------------- loss curves


def write_log(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_loss_curves_from_jsonl_skip_malformed_lines(tmp_path):
    records = [
        {"step": s, "epoch": s // 3, "train_loss": 4.0 / (s + 1), "lr": 1e-3} for s in range(1, 10)
    ]
    for record in records[2::3]:
        record["dev_loss"] = record["train_loss"] * 1.1
    lines = [json.dumps(r) for r in records]
    lines.insert(1, '{"step": 99, "train_loss": ')
    lines.insert(4, "[1, 2, 3]")
    lines.insert(6, "")
    log = write_log(tmp_path / "metrics.jsonl", lines)

    with pytest.warns(UserWarning, match=r"2 malformed line\(s\).*line 2, 5"):
        result = plots.plot_loss_curves(log, tmp_path / "loss.png", logy=True, dpi=DPI)
    assert_real_png(result.path)
    train_x, train_y = result.data["curves"]["train_loss"]
    np.testing.assert_array_equal(train_x, [r["step"] for r in records])
    np.testing.assert_allclose(train_y, [r["train_loss"] for r in records])
    dev_x, _ = result.data["curves"]["dev_loss"]
    np.testing.assert_array_equal(dev_x, [r["step"] for r in records if "dev_loss" in r])
    assert result.figure.axes[0].get_yscale() == "log"


def test_read_metrics_on_clean_file_does_not_warn(tmp_path):
    log = write_log(tmp_path / "m.jsonl", [json.dumps({"step": 1, "train_loss": 1.0})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plots.read_metrics(log) == [{"step": 1, "train_loss": 1.0}]
    with pytest.raises(FileNotFoundError, match="nothere.jsonl"):
        plots.read_metrics(tmp_path / "nothere.jsonl")


def test_loss_curves_sweep_mapping_draws_one_labelled_curve_each(tmp_path):
    sweep = {"lr=1e-3": [2.0, 1.5, 1.2, 1.0], "lr=1e-2": [2.0, 1.0, 0.6], "学习率=0.1": [2, 3, 9]}
    result = plots.plot_loss_curves(sweep, tmp_path / "sweep.svg", dpi=DPI)
    ax = result.figure.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == list(sweep)
    for line, values in zip(ax.get_lines(), sweep.values()):
        np.testing.assert_array_equal(line.get_ydata(), values)
        np.testing.assert_array_equal(line.get_xdata(), np.arange(1, len(values) + 1))


def test_loss_curves_say_why_training_loss_is_higher(tmp_path):
    records = [{"step": s, "train_loss": 3.0 / s + 1.5, "dev_loss": 2.0 / s} for s in range(1, 6)]
    result = plots.plot_loss_curves(records, tmp_path / "loss.png", dpi=DPI)
    legend = [t.get_text() for t in result.figure.axes[0].get_legend().get_texts()]
    assert legend == [plots.METRIC_LABELS["train_loss"], plots.METRIC_LABELS["dev_loss"]]
    assert "label smoothing" in legend[0] and "dropout" in legend[0]
    assert "dropout" in legend[1] and "smoothing" not in legend[1]
    own = plots.plot_loss_curves(records, tmp_path / "l.png", labels={"dev_loss": "held out"})
    assert [line.get_label() for line in own.figure.axes[0].get_lines()][1] == "held out"


def test_loss_curves_from_records_with_epoch_only(tmp_path):
    records = [{"epoch": e, "dev_loss": 1.0 / e, "dev_bleu": 10.0 * e} for e in range(1, 5)]
    with pytest.warns(UserWarning, match="no numeric 'train_loss'"):
        result = plots.plot_loss_curves(records, tmp_path / "l.png", dpi=DPI)
    assert result.data["x_label"] == "epoch"
    assert list(result.data["curves"]) == ["dev_loss"]
    bleu = plots.plot_loss_curves(records, tmp_path / "b.png", keys="dev_bleu", dpi=DPI)
    np.testing.assert_array_equal(bleu.data["curves"]["dev_bleu"][1], [10, 20, 30, 40])


def test_loss_curves_bad_input(tmp_path):
    out = tmp_path / "l.png"
    with pytest.raises(ValueError, match=r"none of keys .*keys present: \['lr', 'step'\]"):
        plots.plot_loss_curves([{"step": 1, "lr": 0.1}], out)
    with pytest.raises(ValueError, match="logy=True needs positive values"):
        plots.plot_loss_curves({"a": [1.0, 0.0]}, out, logy=True)
    with pytest.raises(TypeError, match="must be dicts"):
        plots.plot_loss_curves([1.0, 2.0], out)
    with pytest.raises(TypeError, match="got int"):
        plots.plot_loss_curves(3, out)
    with pytest.raises(ValueError, match="'a' must be a non-empty 1-D"):
        plots.plot_loss_curves({"a": []}, out)


# ---------------------------------------------------------------- descent path


def gradient_descent(gradient, start, learning_rate, steps):
    point = np.asarray(start, dtype=float)
    path = [point]
    for _ in range(steps):
        point = point - learning_rate * gradient(point)
        path.append(point)
    return np.array(path)


def test_descent_path_2d(tmp_path):
    def bowl(x, y):
        return x**2 + 3 * y**2

    path = gradient_descent(lambda p: np.array([2 * p[0], 6 * p[1]]), (2.0, 1.0), 0.1, 12)
    result = plots.plot_descent_path(bowl, path, tmp_path / "d2.png", resolution=40, dpi=DPI)
    assert_real_png(result.path)
    grid_x, grid_y = result.data["grid"]
    np.testing.assert_allclose(result.data["values"], bowl(grid_x, grid_y))
    np.testing.assert_allclose(result.data["path_values"], bowl(path[:, 0], path[:, 1]))
    assert np.all(np.diff(result.data["path_values"]) < 0), "descent should go downhill"
    drawn = [
        line for line in result.figure.axes[0].get_lines() if line.get_label() == "descent path"
    ]
    np.testing.assert_array_equal(drawn[0].get_xdata(), path[:, 0])


def test_descent_path_1d_with_scalar_only_function(tmp_path):
    def loss(x):
        return math.exp(x) - 2 * x

    path = gradient_descent(lambda x: np.exp(x) - 2, [2.0], 0.3, 10)[:, 0]
    result = plots.plot_descent_path(
        loss, path, tmp_path / "d1.svg", bounds=(-1, 3), resolution=30, dpi=DPI
    )
    grid = result.data["grid"]
    assert grid[0] == -1 and grid[-1] == 3
    np.testing.assert_allclose(result.data["values"], [loss(x) for x in grid])
    assert abs(path[-1] - math.log(2)) < 0.05


def test_descent_path_bad_input(tmp_path):
    out = tmp_path / "d.png"
    with pytest.raises(ValueError, match=r"\(n, 2\).*\(4, 3\)"):
        plots.plot_descent_path(lambda x, y, z: x, np.zeros((4, 3)), out)
    with pytest.raises(TypeError, match="f must be callable"):
        plots.plot_descent_path(3.0, [1.0, 2.0], out)
    with pytest.raises(ValueError, match="low < high"):
        plots.plot_descent_path(lambda x: x**2, [1.0], out, bounds=(2, 1))
    with pytest.raises(ValueError, match="calling f on a grid point failed"):
        plots.plot_descent_path(lambda x: 1 / 0, [1.0], out)


# ---------------------------------------------------------------- decision boundary, confusion


def two_blobs(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = np.concatenate([rng.normal(-1.5, 0.6, (n, 2)), rng.normal(1.5, 0.6, (n, 2))])
    y = np.repeat([0, 1], n)
    return X, y


def test_decision_boundary_with_labels_scores_and_probabilities(tmp_path):
    X, y = two_blobs()

    def score(points):
        return points[:, 0] + points[:, 1]

    labels = plots.plot_decision_boundary(
        lambda p: (score(p) > 0).astype(int), X, y, tmp_path / "labels.png", resolution=30, dpi=DPI
    )
    assert_real_png(labels.path)
    grid_x, grid_y = labels.data["grid"]
    assert labels.data["discrete"]
    np.testing.assert_array_equal(labels.data["prediction"], (grid_x + grid_y > 0).astype(float))

    scores = plots.plot_decision_boundary(
        score, X, 2 * y - 1, tmp_path / "scores.png", resolution=30, dpi=DPI
    )
    assert not scores.data["discrete"]
    np.testing.assert_allclose(scores.data["prediction"], grid_x + grid_y)

    def probabilities(points):
        p = 1 / (1 + np.exp(-score(points)))
        return np.column_stack([1 - p, p])

    probs = plots.plot_decision_boundary(
        probabilities, X, y, tmp_path / "p.png", resolution=30, dpi=DPI
    )
    np.testing.assert_array_equal(probs.data["prediction"], (grid_x + grid_y > 0).astype(float))


def test_decision_boundary_bad_input(tmp_path):
    X, y = two_blobs(5)
    out = tmp_path / "b.png"
    with pytest.raises(ValueError, match=r"y must have shape \(10,\).*\(9,\)"):
        plots.plot_decision_boundary(lambda p: p[:, 0], X, y[:-1], out)
    with pytest.raises(ValueError, match=r"X must have shape \(n, 2\)"):
        plots.plot_decision_boundary(lambda p: p[:, 0], X[:, :1], y, out)
    with pytest.raises(ValueError, match="predict_fn returned shape"):
        plots.plot_decision_boundary(lambda p: p[:3, 0], X, y, out)


def test_confusion_matrix(tmp_path, no_cjk_font):
    cm = [[5, 1], [2, 7]]
    with pytest.warns(plots.MissingCJKFontWarning):
        result = plots.plot_confusion_matrix(cm, ["苹果", "香蕉"], tmp_path / "cm.png", dpi=DPI)
    assert_real_png(result.path)
    assert {"5", "1", "2", "7"} <= set(texts_of(result.figure))
    normalized = plots.plot_confusion_matrix(
        cm, ["a", "b"], tmp_path / "n.svg", normalize=True, dpi=DPI
    )
    np.testing.assert_allclose(normalized.data["matrix"].sum(axis=1), 1.0)
    assert {"0.83", "0.17", "0.22", "0.78"} <= set(texts_of(normalized.figure))
    with pytest.raises(ValueError, match="2x2 but got 3 labels"):
        plots.plot_confusion_matrix(cm, ["a", "b", "c"], tmp_path / "x.png")
    with pytest.raises(ValueError, match="square"):
        plots.plot_confusion_matrix([[1, 2, 3]], ["a"], tmp_path / "x.png")
