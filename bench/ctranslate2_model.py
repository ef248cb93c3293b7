"""Our Transformer as a CTranslate2 model, through CTranslate2's spec API (bench and test tooling).

    path = convert(model, out_dir)                   # writes out_dir/model.bin + vocabularies
    translator = ctranslate2.Translator(path, compute_type="float32", intra_threads=1)
    ids = greedy(translator, src, 32, default_tokens(vocab))   # (B, 32) ids, as ours with no <eos>

The mapping (ours -> ctranslate2.specs.TransformerSpec), per layer:
    *.self_attn.w_q/w_k/w_v      -> self_attention.linear[0] (stacked q, k, v: 3·d_model × d_model)
    *.cross_attn.w_q             -> attention.linear[0];  w_k/w_v stacked -> attention.linear[1]
    *.w_o                        -> linear[-1]
    add_norm1/2(/3).norm         -> the norm of the sub-layer it wraps (self_attention, attention, ffn)
    feed_forward.w_1/w_2         -> ffn.linear_0/linear_1 (ReLU)
    encoder.norm / decoder.norm  -> encoder.layer_norm / decoder.layer_norm
    generator                    -> decoder.projection
CTranslate2 wires its norms as ours: post-LN unless `pre_norm`, and a closing LayerNorm when the
stack has a `layer_norm` (its spec declares one only for pre-LN, so for post-LN + final_norm the
spec is built as pre-LN and `pre_norm` is switched off afterwards). Embeddings are scaled by
√d_model on both sides. CTranslate2's built-in sinusoid lays sin and cos out differently from ours
(interleaved, paper §3.5: the test fails without this), so our table goes into `position_encodings`.

Token ids travel as strings: the vocabulary is our token strings (by default "<pad>", "<unk>",
"<bos>", "<eos>" for ids 0-3, then "4", "5", ...), and the config names <unk>, <bos>, <eos> as
CTranslate2's unk/bos/eos tokens, so id i is vocabulary entry i on both sides. ctranslate2 is
imported only inside these functions: it is never a dependency of tinygrad-lite.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")  # ids 0..3, as transformer.data.vocab
BOS = 2


def default_tokens(vocab: int) -> list:
    """Our ids as CTranslate2 tokens: the four specials, then the id as a string."""
    if vocab < len(SPECIALS):
        raise ValueError(f"ctranslate2 conversion: the vocabulary needs the ids of {SPECIALS}, got {vocab} ids")
    return list(SPECIALS) + [str(i) for i in range(len(SPECIALS), vocab)]


def _linear(spec, weights: dict, *names: str):
    """Set a LinearSpec from one or more of our Linears (several: stacked along the output)."""
    spec.weight = np.concatenate([weights[f"{n}.weight"] for n in names], axis=0)
    spec.bias = np.concatenate([weights[f"{n}.bias"] for n in names], axis=0)


def _norm(spec, weights: dict, name: str):
    spec.gamma, spec.beta = weights[f"{name}.weight"], weights[f"{name}.bias"]


def _attention(spec, weights: dict, block: str, cross: bool):
    if cross:
        _linear(spec.linear[0], weights, f"{block}.w_q")
        _linear(spec.linear[1], weights, f"{block}.w_k", f"{block}.w_v")
    else:
        _linear(spec.linear[0], weights, f"{block}.w_q", f"{block}.w_k", f"{block}.w_v")
    _linear(spec.linear[-1], weights, f"{block}.w_o")


def _ffn(spec, weights: dict, layer: str):
    _linear(spec.linear_0, weights, f"{layer}.feed_forward.w_1")
    _linear(spec.linear_1, weights, f"{layer}.feed_forward.w_2")


def _stack(spec, weights: dict, stack: str, config, positions: np.ndarray):
    embed = weights[f"{'src' if stack == 'encoder' else 'tgt'}_embed.lut.weight"]
    if stack == "encoder":
        spec.embeddings[0].weight = embed
    else:
        spec.embeddings.weight = embed
    spec.position_encodings.encodings = positions
    if config.final_norm:
        _norm(spec.layer_norm, weights, f"{stack}.norm")
    spec.pre_norm = config.norm_first
    for i, layer in enumerate(spec.layer):
        name = f"{stack}.layers.{i}"
        _attention(layer.self_attention, weights, f"{name}.self_attn", cross=False)
        _norm(layer.self_attention.layer_norm, weights, f"{name}.add_norm1.norm")
        if stack == "decoder":
            _attention(layer.attention, weights, f"{name}.cross_attn", cross=True)
            _norm(layer.attention.layer_norm, weights, f"{name}.add_norm2.norm")
        _ffn(layer.ffn, weights, name)
        _norm(layer.ffn.layer_norm, weights, f"{name}.add_norm{3 if stack == 'decoder' else 2}.norm")


def model_spec(model, max_positions: int = 1024, src_tokens: list | None = None, tgt_tokens: list | None = None):
    """A validated ctranslate2.specs.TransformerSpec holding a copy of `model`'s weights (float32).

    `max_positions` is the length of the position table: the longest source, and the longest
    decode + 1, CTranslate2 will accept."""
    from ctranslate2.specs import TransformerSpec, common_spec

    from transformer.positional_encoding import sinusoidal_table

    c = model.config
    weights = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in model.state_dict().items()}
    # pre_norm=True declares the closing norms; _stack sets the real pre_norm afterwards
    spec = TransformerSpec.from_config((c.N, c.N), c.h, pre_norm=True, no_final_norm=not c.final_norm,
                                       activation=common_spec.Activation.RELU)
    positions = sinusoidal_table(max_positions, c.d_model, np.float32)
    _stack(spec.encoder, weights, "encoder", c, positions)
    _stack(spec.decoder, weights, "decoder", c, positions)
    _linear(spec.decoder.projection, weights, "generator")
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = SPECIALS[1:4]
    spec.config.decoder_start_token = SPECIALS[BOS]
    spec.config.layer_norm_epsilon = 1e-5  # tinygrad_lite.nn.LayerNorm's, as PyTorch's
    spec.register_source_vocabulary(src_tokens or default_tokens(c.src_vocab))
    spec.register_target_vocabulary(tgt_tokens or default_tokens(c.tgt_vocab))
    spec.validate()
    spec.optimize(quantization="float32")
    return spec


def convert(model, out_dir, **options) -> str:
    """Write `model` as a CTranslate2 model directory (model_spec's options); returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model_spec(model, **options).save(str(out))
    return str(out)


def translator(path: str, threads: int = 1):
    """A float32 CPU translator on `threads` intra-op threads, one batch at a time."""
    import ctranslate2
    return ctranslate2.Translator(path, device="cpu", compute_type="float32", intra_threads=threads,
                                  inter_threads=1)


def _source(src: np.ndarray, tokens: list, pad_id: int) -> list:
    """Right-padded (B, S) ids -> one token list per row, padding dropped (CTranslate2 takes lengths)."""
    return [[tokens[i] for i in row[row != pad_id]] for row in src]


def greedy(translator, src: np.ndarray, new_tokens: int, tokens: list, pad_id: int = 0) -> np.ndarray:
    """Greedy decoding of (B, S) right-padded ids: (B, new_tokens) ids, every row full length
    (end_token=[]: no token ends a row, like bench/decode.py's <eos> that never occurs for ours).
    `tokens` is the target vocabulary the model was converted with (default_tokens by default)."""
    results = translator.translate_batch(_source(src, tokens, pad_id), beam_size=1, max_decoding_length=new_tokens,
                                         end_token=[], max_input_length=0)
    index = {t: i for i, t in enumerate(tokens)}
    return np.array([[index[t] for t in r.hypotheses[0]] for r in results], dtype=np.int64)


def log_probs(translator, src: np.ndarray, tgt: np.ndarray, tokens: list, pad_id: int = 0) -> list:
    """CTranslate2's log-probability of each target token given <bos> and the ones before it
    (teacher forcing), one array per row: the same numbers as ours log_softmax(model(src, <bos> tgt))."""
    target = [[tokens[i] for i in row] for row in tgt]
    results = translator.score_batch(_source(src, tokens, pad_id), target, max_input_length=0)
    return [np.array(r.log_probs[:len(t)]) for r, t in zip(results, target)]
