"""The Transformer of "Attention Is All You Need", built on tinygrad_lite alone.

One class per box of the paper's Figure 1:
    Embeddings, PositionalEncoding            (inputs)
    MultiHeadAttention, scaled_dot_product_attention
    AddNorm, PositionwiseFeedForward
    EncoderLayer, Encoder, DecoderLayer, Decoder
    Transformer                               (the whole model + the generator)
Masks use one convention: True = may attend (transformer.masks).

Names are imported on first use, so `transformer.data` works without loading the engine.
"""
import importlib

_EXPORTS = {
    "AddNorm": "add_norm", "MultiHeadAttention": "attention", "scaled_dot_product_attention": "attention",
    "Decoder": "decoder", "DecoderLayer": "decoder", "Encoder": "encoder", "EncoderLayer": "encoder",
    "PositionwiseFeedForward": "feed_forward", "causal_mask": "masks", "padding_mask": "masks",
    "target_mask": "masks", "Embeddings": "model", "Transformer": "model", "TransformerConfig": "model",
    "PositionalEncoding": "positional_encoding", "sinusoidal_table": "positional_encoding",
    "BeamTrace": "decoding", "translate_with_mask": "lab", "GPT": "gpt.model", "GPTConfig": "gpt.model",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'transformer' has no attribute {name!r}")


def __dir__():
    return __all__
