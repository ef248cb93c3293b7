"""§14 of the walkthrough, the article's 位置编码 (paper §3.5): the sinusoidal table, PE(pos+k) as
a rotation of PE(pos), wavelengths, any length, and why attention without it cannot tell
我是你老板 from 你是我老板."""
from __future__ import annotations

import math

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from transformer import MultiHeadAttention, PositionalEncoding, sinusoidal_table
from transformer.data import tokenize_zh
from transformer.walkthrough.example import D_MODEL, H, toy_vocab
from transformer.walkthrough.printing import FIGURE_NAMES, check, claim, fmt, heading, note


# ---------------------------------------------------------------- 14. positional encoding
def shift_error(table: np.ndarray, k: int) -> float:
    """Max |PE(pos+k) − PE(pos)·M_k| over all positions and dimension pairs, with the row vector
    [sin, cos] of each pair times M_k = [[cos kω, −sin kω], [sin kω, cos kω]]."""
    d_model = table.shape[1]
    omega = 1.0 / 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    worst = 0.0
    for i, w in enumerate(omega):
        rotation = np.array([[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]])
        pair = table[:, 2 * i:2 * i + 2]
        worst = max(worst, float(np.abs(pair[:-k] @ rotation - pair[k:]).max()))
    return worst


def boss_output(attention, pe, table, vocab, sentence: str, with_pe: bool) -> np.ndarray:
    """The self-attention output at 老板's two characters."""
    x = Tensor(table[vocab.encode(tokenize_zh(sentence))][None])
    if with_pe:
        x = pe(x)
    at = sentence.index("老板")
    return attention(x, x, x).data[0, at:at + 2]


def word_order_differences() -> dict:
    """老板's attention output, 我是你老板 vs 你是我老板, relative max difference without PE (False)
    and with it (True): attention alone cannot tell the two apart."""
    claim("没有位置信息时，把“我”和“你”对调（我是你老板 / 你是我老板），“老板”得到的注意力输出完全一样",
          "without position information, swapping 我 and 你 (我是你老板 / 你是我老板) leaves 老板's "
          "attention output unchanged")
    vocab = toy_vocab("我是你老板")
    embedding_table = np.random.default_rng(0).standard_normal((len(vocab), D_MODEL)).astype(np.float32)
    tl.manual_seed(0)
    attention = MultiHeadAttention(D_MODEL, H, dropout=0.0)
    pe = PositionalEncoding(D_MODEL, dropout=0.0)
    differences = {}
    for with_pe in (False, True):
        a, b = (boss_output(attention, pe, embedding_table, vocab, sentence, with_pe)
                for sentence in ("我是你老板", "你是我老板"))
        differences[with_pe] = float(np.abs(a - b).max() / np.abs(a).max())
    check("老板's self-attention output, 我是你老板 vs 你是我老板, without PE",
          f"relative max diff {differences[False]:.0e}", "the same", differences[False] < 1e-5)
    check("… with PE", f"relative max diff {differences[True]:.2f}", "differs", differences[True] > 1e-2)
    return differences


def section_pe(figures=None) -> dict:
    heading(14, "位置编码", "Positional encoding", "位置编码")
    claim("正弦位置编码：PE(pos,2i) = sin(pos/10000^(2i/d_model))，PE(pos,2i+1) = cos(pos/10000^(2i/d_model))",
          "the sinusoidal encoding: PE(pos,2i) = sin(pos/10000^(2i/d_model)), "
          "PE(pos,2i+1) = cos(pos/10000^(2i/d_model))")
    table = sinusoidal_table(100, D_MODEL, dtype=np.float64)
    pos, i = 7, 10
    formula = (math.sin(pos / 10000 ** (2 * i / D_MODEL)), math.cos(pos / 10000 ** (2 * i / D_MODEL)))
    check(f"PE({pos}, {2 * i}), PE({pos}, {2 * i + 1})", fmt(table[pos, 2 * i:2 * i + 2], 6), fmt(formula, 6),
          np.allclose(table[pos, 2 * i:2 * i + 2], formula))
    claim("PE(pos+k) 由 PE(pos) 和偏移 k 决定：每一对 (sin, cos) 维度上都是一个只依赖 k 的旋转",
          "PE(pos+k) follows from PE(pos) and k alone: [sin, cos]·[[cos kω, −sin kω], [sin kω, cos kω]]")
    errors = {k: shift_error(table, k) for k in (1, 5, 17)}
    check("max |PE(pos+k) − PE(pos)·M_k| over 100 positions × 256 pairs, k = 1, 5, 17",
          ", ".join(f"{e:.0e}" for e in errors.values()), "0 (sin/cos addition formulas)",
          max(errors.values()) < 1e-9)
    claim("维度编号 i 越大，这一维随 pos 变化得越慢，周期越长",
          "the higher the dimension index i, the slower it varies with pos: wavelengths grow")
    wavelengths = 2 * math.pi * 10000.0 ** (np.arange(0, D_MODEL, 2) / D_MODEL)
    check("wavelength 2π·10000^(2i/d_model), i = 0 … 255",
          f"{wavelengths[0]:.2f}, {wavelengths[1]:.2f}, … {wavelengths[-1]:,.0f} (increasing)", "grows",
          bool(np.all(np.diff(wavelengths) > 0)))
    claim("公式对任何 pos 都能直接算，长度不受限制", "the formula gives any position, so any length works")
    short = PositionalEncoding(D_MODEL, dropout=0.0, max_len=8)
    long_out = short(Tensor(np.zeros((1, 1000, D_MODEL), np.float32))).data[0]
    length_error = float(np.abs(long_out - sinusoidal_table(1000, D_MODEL)).max())
    check("PositionalEncoding(max_len = 8) on 1000 positions vs the formula", f"max diff {length_error:.0e}",
          "any length", length_error < 1e-6)
    note("公式里的 i 不是“特征维度”本身，而是维度对的编号：第 2i 和 2i+1 维共用一个频率",
         "i is the index of a pair of dimensions (2i and 2i+1 share one frequency), not the dimension itself")

    differences = word_order_differences()
    files = [] if figures is None else [figures.draw(FIGURE_NAMES["pe"], "plot_positional_encoding", table)]
    return {"formula_value": formula, "shift_errors": errors, "wavelengths": wavelengths,
            "length_error": length_error, "boss_difference_without_pe": differences[False],
            "boss_difference_with_pe": differences[True], "files": files}
