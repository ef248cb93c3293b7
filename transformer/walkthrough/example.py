"""The article's running example, 这是一个苹果 → This is an apple, in the sizes of the paper's
base model (Table 3), and the small helpers every section of the walkthrough shares."""
from __future__ import annotations

import math

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from transformer import Embeddings, PositionalEncoding
from transformer.data import Vocab, tokenize_zh

SENTENCE = "这是一个苹果"
TRANSLATION = "This is an apple"
D_MODEL, H, D_FF, N_LAYERS = 512, 8, 2048, 6          # the paper's base model (Table 3)


def softmax64(z, temperature: float = 1.0) -> np.ndarray:
    """softmax(z / T) with our Tensor, in float64."""
    return Tensor(np.asarray(z, dtype=np.float64)).softmax(-1, scale=1.0 / temperature).data


def toy_vocab(*sentences: str) -> Vocab:
    return Vocab(list(dict.fromkeys(t for s in sentences for t in tokenize_zh(s))))


def six_token_input(seed: int = 0) -> tuple[list, Tensor]:
    """The article's 6 × 512 input: embeddings (×√d_model) plus positional encoding. The table
    starts at N(0, 1/d_model) as in Transformer._init_weights, so ×√d_model gives unit scale."""
    tokens = tokenize_zh(SENTENCE)
    vocab = toy_vocab(SENTENCE)
    tl.manual_seed(seed)
    embed = Embeddings(len(vocab), D_MODEL)
    table = embed.lut.weight.data
    table[...] = np.random.default_rng(seed).standard_normal(table.shape) / math.sqrt(D_MODEL)
    x = PositionalEncoding(D_MODEL, dropout=0.0)(embed(np.array([vocab.encode(tokens)])))
    return tokens, x[0]


def six_tokens_then_seed(layers_seed: int = 0) -> Tensor:
    """six_token_input's 6 × 512 input, then the engine's rng reset to `layers_seed`: the layers a section
    builds next get the same weights whatever drawing the input took."""
    _, x = six_token_input()
    tl.manual_seed(layers_seed)
    return x
