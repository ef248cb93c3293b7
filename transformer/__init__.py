"""The Transformer of "Attention Is All You Need", built on tinygrad_lite alone.

One class per box of the paper's Figure 1:
    Embeddings, PositionalEncoding            (inputs)
    MultiHeadAttention, scaled_dot_product_attention
    AddNorm, PositionwiseFeedForward
    EncoderLayer, Encoder, DecoderLayer, Decoder
    Transformer                               (the whole model + the generator)
Masks use one convention: True = may attend (transformer.masks).
"""
from .add_norm import AddNorm
from .attention import MultiHeadAttention, scaled_dot_product_attention
from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .feed_forward import PositionwiseFeedForward
from .masks import causal_mask, padding_mask, target_mask
from .model import Embeddings, Transformer, TransformerConfig
from .positional_encoding import PositionalEncoding, sinusoidal_table

__all__ = [
    "AddNorm", "MultiHeadAttention", "scaled_dot_product_attention", "Decoder", "DecoderLayer", "Encoder",
    "EncoderLayer", "PositionwiseFeedForward", "causal_mask", "padding_mask", "target_mask", "Embeddings",
    "Transformer", "TransformerConfig", "PositionalEncoding", "sinusoidal_table",
]
