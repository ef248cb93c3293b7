"""A trained model's attention, drawn into one picture: a translator's three kinds (encoder self-,
decoder self- and cross-attention) or a GPT's causal self-attention, layers x heads. Shared by
`python -m viz attention` and `python -m transformer translate --show-attention`; the models are
handed in, so viz never imports transformer."""
from __future__ import annotations

from pathlib import Path

from tinygrad_lite.cli import toy_kernels

KINDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}
VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥"}


def write_attention(translator, sentence: str, out, kinds=None) -> Path:
    """Draw the attention of `translator` translating `sentence` greedily into ONE figure at
    `out` (viz.plots.plot_attention_maps); `kinds` picks sections by short name (encoder,
    decoder, cross; default all). Returns the path written."""
    from viz.plots import plot_attention_maps

    if not hasattr(translator, "attention_maps"):
        raise RuntimeError("attention: this translator has no attention_maps(sentence); update transformer/")
    with toy_kernels():
        maps = translator.attention_maps(sentence)
    wanted = [KINDS[short] for short in (kinds or KINDS)]
    missing = [kind for kind in wanted if kind not in maps]
    if missing:
        raise RuntimeError(f"attention: the translator returned no {missing[0]!r} maps (got {', '.join(maps)})")
    title = sentence
    if "cross-attention" in maps:
        greedy = [token for token in maps["cross-attention"][1][1:] if token not in ("<pad>", "<bos>", "<eos>")]
        title = f"{sentence} → {' '.join(greedy)} (greedy)"
    return plot_attention_maps(maps, out, title=title, kinds=wanted).path


def write_gpt_attention(model, tokenizer, text: str, out) -> Path:
    """A GPT's causal self-attention over `text` (its last block_size tokens): layers down, heads across."""
    from viz.plots import plot_attention

    ids = tokenizer.encode(text)[-model.config.block_size:]
    if len(ids) == 0:
        raise ValueError("attention: the text is empty; give a prompt, e.g. ROMEO:")
    with toy_kernels():
        weights = model.attention_maps(ids)
    tokens = ["".join(VISIBLE.get(ch, ch) for ch in tokenizer.decode([int(i)])) or f"#{int(i)}" for i in ids]
    names = [f"block {i}" for i in range(len(weights))]
    return plot_attention(weights, tokens, out=out, title=repr(text), layer_names=names,
                          kind="causal self-attention").path
