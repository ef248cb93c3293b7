"""The attention lab's data: one translation, with a source token or two masked out, as plain
lists a page can draw (or a learner can print).

    from transformer.lab import translate_with_mask
    result = translate_with_mask(translator, "我喜欢猫", masked_positions=[1])
    result["translation"]                      # the beam translation without source token 1
    result["attention"]["cross-attention"]     # {"queries", "keys", "weights": [layer][head][q][k]}
    result["beam"]["nodes"]                    # the beam search as a tree (decoding.BeamTrace)

A masked token is read as <pad>: the source padding mask (transformer.masks.padding_mask) then
hides it as a key, so neither encoder self-attention nor cross-attention attends to it, exactly
as they ignore padding. Everything runs on the plain path (tinygrad_lite.fast.plain()): the
formula, one op at a time, what a learner reads.
"""
from __future__ import annotations

import threading

import numpy as np

from tinygrad_lite import fast, no_grad

from .data import tokenize_zh
from .decoding import BeamTrace, beam_search
from .fast.decoder_steps import decoder_steps
from .translator import for_display

KINDS = ("encoder self-attention", "decoder self-attention", "cross-attention")
MAX_SOURCE_TOKENS = 100
_ONE_AT_A_TIME = threading.Lock()  # plain() and keep_weights switch state shared by the whole process


def masked_source(translator, text: str, masked_positions) -> tuple[list, np.ndarray, list]:
    """(source tokens, their ids with the masked ones set to <pad>, sorted masked positions);
    a ValueError names what is wrong with the text or the positions."""
    if not isinstance(text, str):
        raise ValueError(f"translate_with_mask: text must be a str, got {type(text).__name__}")
    ids = translator.source_ids(text, warn=False)              # TranslatorError (a ValueError) if empty
    tokens = tokenize_zh(translator.normalize_source(text))
    if len(ids) > MAX_SOURCE_TOKENS:
        raise ValueError(f"translate_with_mask: the text has {len(ids)} tokens; at most {MAX_SOURCE_TOKENS}")
    masked = sorted({int(p) for p in masked_positions})
    bad = [p for p in masked if not 0 <= p < len(ids)]
    if bad:
        raise ValueError(f"translate_with_mask: masked position {bad[0]} is outside the source's "
                         f"{len(ids)} tokens (0..{len(ids) - 1})")
    if len(masked) == len(ids):
        raise ValueError("translate_with_mask: every source token is masked; leave at least one to attend to")
    ids = ids.copy()
    ids[masked] = translator.model.config.pad_id
    return tokens, ids, masked


@no_grad()
def attention_weights(translator, src: np.ndarray, target: list) -> dict:
    """Teacher-force `target` (ids after <bos>) on src (S,) ids and keep every attention module's
    weights: kind -> (L, h, T_q, T_k) array, for the three kinds of KINDS."""
    model = translator.model
    tgt_in = np.array([[translator.tgt_vocab.bos_id] + target[:-1]], dtype=np.int64)
    blocks = {KINDS[0]: [layer.self_attn for layer in model.encoder.layers],
              KINDS[1]: [layer.self_attn for layer in model.decoder.layers],
              KINDS[2]: [layer.cross_attn for layer in model.decoder.layers]}
    modules = [m for mods in blocks.values() for m in mods]
    for m in modules:
        m.keep_weights = True
    try:
        model(src[None], tgt_in)
        return {kind: np.stack([m.weights[0] for m in mods]) for kind, mods in blocks.items()}
    finally:
        for m in modules:
            m.keep_weights, m.weights = False, None


def beam_tree(translator, trace: BeamTrace) -> dict:
    """The trace's nodes with their tokens as text, and the best leaf's id."""
    vocab = translator.tgt_vocab
    nodes = [{**node, "text": "<bos>" if node["token"] is None else vocab.decode([node["token"]],
                                                                                strip_special=False)[0]}
             for node in trace.nodes]
    return {"nodes": nodes, "best": trace.best}


def translate_with_mask(translator, text: str, masked_positions=(), beam: int = 4,
                        length_penalty: float = 0.6) -> dict:
    """Beam-translate `text` with the source tokens at `masked_positions` masked (read as <pad>,
    so no attention reaches them). Returns plain data (JSON-ready):

        source_tokens    the tokens of text (tokenize_zh), masked ones included
        masked           the masked positions, sorted
        unknown          positions of tokens outside the source vocabulary (read as <unk>)
        translation      the best hypothesis, detokenized for display
        target_tokens    its tokens, <eos> included; log_prob its total log-probability
        attention        kind -> {"queries", "keys", "weights": [layer][head][query][key]} of the
                         translation teacher-forced, for the three kinds of KINDS
        beam             {"nodes": [{id, parent, step, token, text, logp, finished}], "best": id}
    """
    if not isinstance(beam, (int, np.integer)) or beam < 1:
        raise ValueError(f"translate_with_mask: beam must be an int >= 1, got {beam!r}")
    tokens, src, masked = masked_source(translator, text, masked_positions)
    unknown = np.flatnonzero(src == translator.src_vocab.unk_id).tolist()
    v, trace = translator.tgt_vocab, BeamTrace()
    with _ONE_AT_A_TIME, fast.plain():
        out, logp, _ = beam_search(translator.model, src, v.bos_id, v.eos_id, beam,
                                   translator._max_len(len(src)), length_penalty, trace=trace,
                                   steps=decoder_steps(translator.model))
        target = [int(t) for t in out]
        weights = attention_weights(translator, src, target)
    target_tokens = v.decode(target, strip_special=False)
    queries = ["<bos>"] + target_tokens[:-1]
    labels = {KINDS[0]: (tokens, tokens), KINDS[1]: (queries, queries), KINDS[2]: (queries, tokens)}
    return {"text": text, "source_tokens": tokens, "masked": masked, "unknown": unknown,
            "translation": for_display(translator.target_text(target)), "target_tokens": target_tokens,
            "log_prob": float(logp),
            "attention": {kind: {"queries": labels[kind][0], "keys": labels[kind][1],
                                 "weights": weights[kind].astype(float).tolist()} for kind in KINDS},
            "beam": beam_tree(translator, trace)}
