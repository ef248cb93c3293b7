"""A GPT block, as GPT-2's and nanoGPT's: masked self-attention, then an MLP, each a residual branch
with a LayerNorm in front (pre-LN):

    x = x + Dropout(Attention(LN_1(x), causal mask))    (B, T, n_embd)
    x = x + MLP(LN_2(x))                                 (B, T, n_embd)
    MLP(x) = Dropout(GELU(x·W_fc)·W_proj)                n_embd -> 4·n_embd -> n_embd

The attention is the paper's MultiHeadAttention (§3.2) under the causal mask of §3.2.3; the MLP is
the paper's position-wise FFN (§3.3, d_ff = 4·d_model) with GELU for ReLU, under nanoGPT's names. The
paper's post-LN order, x = LN(x + Dropout(Sublayer(x))), is the config's option (norm_first=False).
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.checks import one_of
from tinygrad_lite.nn import GELU, Dropout, LayerNorm, Linear, Module, ReLU

from ..attention import MultiHeadAttention

ACTIVATIONS = ("gelu_tanh", "gelu", "relu")
"""gelu_tanh: GPT-2's tanh formula. gelu: exact x·Φ(x), nanoGPT's nn.GELU(). relu: the paper's max(0, ·)."""


def activation_module(name: str) -> Module:
    """The Module of one of ACTIVATIONS."""
    one_of("MLP", "activation", name, ACTIVATIONS)
    return ReLU() if name == "relu" else GELU("tanh" if name == "gelu_tanh" else "none")


class MLP(Module):
    """(B, T, n_embd) -> (B, T, n_embd): the paper's FFN with GELU, dropout on its output."""

    def __init__(self, n_embd: int, activation: str = "gelu_tanh", bias: bool = False, dropout: float = 0.0,
                 dtype=np.float32):
        super().__init__()
        self.c_fc = Linear(n_embd, 4 * n_embd, bias=bias, dtype=dtype)    # the paper's W1
        self.act = activation_module(activation)
        self.c_proj = Linear(4 * n_embd, n_embd, bias=bias, dtype=dtype)  # the paper's W2
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = self.c_fc(x)                                                   # (B, T, 4·n_embd)
        x = self.act(x)
        x = self.c_proj(x)                                                 # (B, T, n_embd)
        return self.dropout(x)


class Block(Module):
    """One GPT block of a GPTConfig `config`: (B, T, n_embd) -> (B, T, n_embd).

    `mask`: which keys each query may see (True = may attend; GPT.forward passes the causal one).
    `cache`: this block's keys/values so far (a KeyValueBuffer), for decoding a token at a time.
    The submodules are listed attention first, as the parameters of the GPTs saved before this
    block were ordered, so their runs resume with their optimizer state (GPT.load_state_dict).
    """

    def __init__(self, config, dtype=np.float32):
        super().__init__()
        c = config
        self.attn = MultiHeadAttention(c.n_embd, c.n_head, c.dropout, bias=c.bias, dtype=dtype)
        self.ln_1 = LayerNorm(c.n_embd, bias=c.bias, dtype=dtype)
        self.mlp = MLP(c.n_embd, c.activation, c.bias, c.dropout, dtype)
        self.ln_2 = LayerNorm(c.n_embd, bias=c.bias, dtype=dtype)
        self.resid_dropout = Dropout(c.dropout)
        self.norm_first = c.norm_first

    def forward(self, x: Tensor, mask=None, cache: dict | None = None) -> Tensor:
        if self.norm_first:                                                # pre-LN: GPT-2's
            x = x + self.resid_dropout(self.self_attention(self.ln_1(x), mask, cache))  # (B, T, n_embd)
            return x + self.mlp(self.ln_2(x))                              # (B, T, n_embd)
        x = self.ln_1(x + self.resid_dropout(self.self_attention(x, mask, cache)))  # post-LN: the paper's
        return self.ln_2(x + self.mlp(x))

    def self_attention(self, x: Tensor, mask, cache: dict | None) -> Tensor:
        """Queries, keys and values all from x: (B, T, n_embd) -> (B, T, n_embd)."""
        return self.attn(x, x, x, mask, cache=cache)

    def extra_repr(self) -> str:
        return "pre-LN" if self.norm_first else "post-LN"
