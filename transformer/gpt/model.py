"""A GPT: a decoder-only language model (Radford et al. 2018, 2019), as nanoGPT's.

A GPT keeps the paper's decoder without its cross-attention: a stack of masked self-attention
blocks (transformer.gpt.block: the paper's MultiHeadAttention under a causal mask and a GELU MLP),
so that position t sees tokens <= t only (§3.2.3) and predicts token t+1:

    x      = wte(idx) + wpe(start .. start+T-1)       (B, T, n_embd)   token + position embeddings
    x      = Block_N(.. Block_1(x, causal mask))      (B, T, n_embd)
    logits = LayerNorm(x) · wteᵀ                      (B, T, vocab)    output layer tied to wte (§3.4)

As GPT-2 and nanoGPT: learned positions, pre-LN blocks, a final LayerNorm, GELU, weights ~ N(0, 0.02)
with the residual projections (W^O, c_proj) at 0.02/√(2·n_layer). The paper's choices are options:
sinusoidal positions, post-LN, ReLU. transformer.gpt.interop has the PyTorch twin and nanoGPT's key names.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from tinygrad_lite import Tensor, checkpoint, no_grad
from tinygrad_lite.checks import head_size, one_of, positive_int, probability
from tinygrad_lite.nn import Dropout, Embedding, LayerNorm, Module, ModuleList, init
from tinygrad_lite.nn import functional as F
from tinygrad_lite.tensor import as_array

from ..kv_cache import KeyValueBuffer
from ..masks import causal_mask
from ..positional_encoding import PositionalEncoding
from .block import ACTIVATIONS, Block
from .old_names import with_block_names

FORMAT = "tinygrad-lite-gpt/1"  # the "format" field of a GPT.save checkpoint's metadata


@dataclass
class GPTConfig:
    """nanoGPT's hyper-parameters under nanoGPT's names, checked once, here. The defaults are
    nanoGPT's CPU recipe ("I only have a macbook": 4 layers, 4 heads, 128 wide, 64 tokens, no bias).

    nanoGPT      the paper
    n_layer      N, the number of blocks
    n_head       h, heads per attention; d_k = d_v = n_embd / n_head
    n_embd       d_model; the MLP's inner size d_ff = 4·n_embd
    block_size   the context length: the most positions one forward sees
    dropout      P_drop (on the embeddings, the attention weights and each residual branch)
    vocab_size   the number of token ids, the output layer's classes
    bias         biases in every Linear and LayerNorm (nanoGPT's bias=False: none)
    positions    "learned" (GPT-2's wpe) or "sinusoidal" (the paper's §3.5)
    norm_first   True: pre-LN, as GPT-2; False: post-LN, as the paper
    activation   "gelu_tanh" (GPT-2's formula), "gelu" (exact, nanoGPT's nn.GELU()), "relu" (the paper)

    A nanoGPT checkpoint's `model_args` fit as they are: GPTConfig(**ckpt["model_args"]).
    """
    vocab_size: int
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False
    positions: str = "learned"
    norm_first: bool = True
    activation: str = "gelu_tanh"

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            setattr(self, name, positive_int("GPTConfig", name, getattr(self, name)))
        head_size("GPTConfig", self.n_embd, self.n_head)
        self.dropout = probability("GPTConfig", "dropout", self.dropout, allow_one=False)
        for name in ("bias", "norm_first"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"GPTConfig: {name} must be True or False, got {getattr(self, name)!r}")
            setattr(self, name, bool(getattr(self, name)))
        one_of("GPTConfig", "positions", self.positions, ("learned", "sinusoidal"))
        one_of("GPTConfig", "activation", self.activation, ACTIVATIONS)

    @property
    def d_ff(self) -> int:
        return 4 * self.n_embd

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> GPTConfig:
        """The inverse of to_dict (what a checkpoint stores)."""
        return cls(**values)


def attention_mask(start: int, length: int) -> np.ndarray | None:
    """Which keys the queries at positions start .. start+length-1 may see, among the keys at
    0 .. start+length-1: (1, 1, length, start+length) bool, True = may attend (transformer.masks).
    None when nothing is hidden: one new query after a cache sees every key so far."""
    if start == 0:
        return causal_mask(length)
    if length == 1:
        return None
    return np.tril(np.ones((length, start + length), dtype=bool), k=start)[None, None]


class GPT(Module):
    """model(idx) -> logits (B, T, vocab_size) for int token ids idx (B, T), T <= block_size.

    `dtype` (float32, or float64 for gradcheck) is the parameters' dtype. Modules, with nanoGPT's
    names (transformer.gpt.interop maps them): token_embedding (wte), position_embedding (wpe; or
    position_encoding, the sinusoids), blocks (h, each a Block), norm (ln_f).
    """

    def __init__(self, config: GPTConfig, dtype=np.float32):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT: expected a GPTConfig, got {type(config).__name__}")
        self.config = c = config
        self.token_embedding = Embedding(c.vocab_size, c.n_embd, dtype=dtype)                    # wte
        learned = c.positions == "learned"
        self.position_embedding = Embedding(c.block_size, c.n_embd, dtype=dtype) if learned else None  # wpe
        self.position_encoding = None if learned else PositionalEncoding(c.n_embd, c.dropout, c.block_size, dtype)
        self.dropout = Dropout(c.dropout)
        self.blocks = ModuleList([Block(c, dtype) for _ in range(c.n_layer)])                   # h
        self.norm = LayerNorm(c.n_embd, bias=c.bias, dtype=dtype)                                 # ln_f
        self.init_weights()

    def init_weights(self) -> None:
        """GPT-2's: every matrix (embeddings included) ~ N(0, 0.02), biases 0, LayerNorm gains 1; the
        projections that end a residual branch (W^O, c_proj) ~ N(0, 0.02/√(2·n_layer)), so the residual
        stream's variance does not grow with depth (Radford et al. 2019, §2.3)."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if name.endswith(("attn.w_o.weight", "mlp.c_proj.weight")):
                init.normal_(p, 0.0, residual_std)
            elif p.ndim == 2:
                init.normal_(p, 0.0, 0.02)
            elif name.endswith(".bias"):
                init.zeros_(p)

    # ------------------------------------------------------------ the forward pass
    def forward(self, idx, cache: list | None = None) -> Tensor:
        """idx (B, T) int ids -> logits (B, T, vocab_size): at each position, the scores of the next token.

        With a `cache` (from new_cache()), idx holds only the tokens after those already fed through
        it: their positions follow on, each block's self-attention reuses the cached keys/values and
        appends the new ones, and the logits equal those of the full forward at the same positions.
        """
        start = self.cache_length(cache)
        ids = self.check_ids(idx, start)
        mask = attention_mask(start, ids.shape[1])                     # (1, 1, T, start+T) or None
        x = self.embed(ids, start)                                     # (B, T, n_embd)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, cache=None if cache is None else cache[i])  # (B, T, n_embd)
        return F.linear(self.norm(x), self.token_embedding.weight)     # (B, T, vocab_size), tied to wte

    def embed(self, ids: np.ndarray, start: int = 0) -> Tensor:
        """Token embeddings plus the positions start .., then dropout: (B, T) ids -> (B, T, n_embd)."""
        x = self.token_embedding(ids)                                  # (B, T, n_embd)
        if self.position_encoding is not None:
            return self.position_encoding(x, start=start)              # + PE (§3.5), then dropout
        positions = np.arange(start, start + ids.shape[1])
        return self.dropout(x + self.position_embedding(positions))   # (T, n_embd) broadcasts over B

    def loss(self, idx, targets, ignore_index: int = -1) -> Tensor:
        """The mean cross-entropy of the next-token predictions: targets (B, T) are idx shifted by one
        (targets[:, t] = the token after idx[:, t]); targets equal to ignore_index count for nothing."""
        targets, shape = as_array(targets), as_array(idx).shape
        if targets.shape != tuple(shape):
            raise ValueError(f"GPT.loss: targets must have the shape of idx {tuple(shape)}, got {targets.shape}")
        logits = self(idx)                                             # (B, T, vocab_size)
        return F.cross_entropy(logits.reshape(-1, self.config.vocab_size), targets.reshape(-1),
                               ignore_index=ignore_index)

    def check_ids(self, idx, start: int = 0) -> np.ndarray:
        """idx as a (B, T) int array, or an error naming what is wrong with it."""
        ids = as_array(idx)
        c = self.config
        if ids.ndim != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
            raise ValueError(f"GPT: idx must be token ids of shape (B, T) with B, T >= 1, got shape {ids.shape}")
        if ids.dtype.kind not in "iu":
            raise TypeError(f"GPT: idx must be integer token ids, got dtype {ids.dtype}")
        if start + ids.shape[1] > c.block_size:
            cached = f" after {start} cached positions" if start else ""
            raise ValueError(f"GPT: {ids.shape[1]} tokens{cached} exceed block_size={c.block_size}, the longest "
                             "context the model has positions for; crop idx to its last tokens")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            bad = ids[(ids < 0) | (ids >= c.vocab_size)]
            raise ValueError(f"GPT: token id {int(bad[0])} is outside the vocabulary [0, {c.vocab_size - 1}]")
        return ids

    def attention_maps(self, idx) -> np.ndarray:
        """The causal self-attention weights of every block and head for one sequence of ids (T,) or
        (1, T): (n_layer, n_head, T, T), row t the weights query t gives keys 0..t (zero above the
        diagonal). Runs in eval mode (no dropout) and without gradients; the mode is restored."""
        ids = np.asarray(idx.data if isinstance(idx, Tensor) else idx)
        ids = ids[None] if ids.ndim == 1 else ids
        if ids.ndim != 2 or ids.shape[0] != 1:
            raise ValueError(f"GPT.attention_maps: expected one sequence of ids, shape (T,) or (1, T), got {ids.shape}")
        heads = [block.attn for block in self.blocks]
        was_training = self.training
        self.eval()
        for head in heads:
            head.keep_weights = True
        try:
            with no_grad():
                self(ids)
            return np.stack([head.weights[0] for head in heads])          # (n_layer, n_head, T, T)
        finally:
            for head in heads:
                head.keep_weights, head.weights = False, None
            self.train(was_training)

    # ------------------------------------------------------------ incremental decoding
    def new_cache(self) -> list:
        """An empty key/value cache: one KeyValueBuffer per block (transformer.kv_cache), which grows in
        place as tokens are fed. Run decoding under tinygrad_lite.no_grad()."""
        return [KeyValueBuffer() for _ in range(self.config.n_layer)]

    def cache_length(self, cache: list | None) -> int:
        """How many positions the cache holds (0 for None or a new cache)."""
        if cache is None:
            return 0
        if not isinstance(cache, list) or len(cache) != self.config.n_layer:
            raise ValueError(f"GPT: cache must be the list of {self.config.n_layer} per-block dicts that "
                             f"new_cache() returns, got {type(cache).__name__}")
        return cache[0]["k"].shape[1] if "k" in cache[0] else 0

    # ------------------------------------------------------------ bookkeeping
    def num_params(self, non_embedding: bool = True) -> int:
        """The parameter count; as nanoGPT, without the position embeddings unless non_embedding=False
        (the token embedding counts: it is also the output layer)."""
        n = sum(p.data.size for p in self.parameters())
        if non_embedding and self.position_embedding is not None:
            n -= self.position_embedding.weight.data.size
        return n

    def param_groups(self, weight_decay: float) -> list:
        """nanoGPT's optimizer groups: weight decay on the matrices (embeddings and Linear weights),
        none on biases and LayerNorm gains. Pass them to tinygrad_lite.optim.AdamW."""
        params = list(self.parameters())
        return [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
                {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]

    def block_matrices(self) -> list:
        """The weight matrices inside the blocks (attention's W^Q, W^K, W^V, W^O and the MLP's c_fc, c_proj):
        Muon's share; the embeddings (also the tied output layer), gains and biases are AdamW's."""
        return [p for block in self.blocks for p in block.parameters() if p.ndim == 2]

    def load_state_dict(self, state_dict, strict: bool = True):
        """Module.load_state_dict, which also takes the block names of older GPTs (transformer.gpt.old_names)."""
        return super().load_state_dict(with_block_names(state_dict), strict)

    def save(self, path, metadata: dict | None = None) -> None:
        """A safetensors checkpoint (tinygrad_lite.checkpoint) of the weights, with the config and
        `metadata` (e.g. the tokenizer) in its header."""
        checkpoint.save(self.state_dict(), path, {**(metadata or {}), "format": FORMAT,
                                                  "config": self.config.to_dict()})

    @classmethod
    def load(cls, path) -> tuple[GPT, dict]:
        """(the model, its metadata) from a GPT.save checkpoint; raises CheckpointError for another file."""
        arrays, metadata = checkpoint.load(path)
        if metadata.get("format") != FORMAT or "config" not in metadata:
            raise checkpoint.CheckpointError(f"GPT.load: {str(path)!r} is not a GPT checkpoint (its format is "
                                             f"{metadata.get('format')!r}, expected {FORMAT!r})")
        model = cls(GPTConfig.from_dict(metadata["config"]), dtype=arrays["token_embedding.weight"].dtype)
        model.load_state_dict(arrays)
        return model, metadata

    def extra_repr(self) -> str:
        c = self.config
        return (f"n_layer={c.n_layer}, n_head={c.n_head}, n_embd={c.n_embd}, block_size={c.block_size}, "
                f"vocab_size={c.vocab_size}, {'pre' if c.norm_first else 'post'}-LN, {c.positions} positions")
