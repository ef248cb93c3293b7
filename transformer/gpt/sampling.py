"""Sampling from a GPT: the next token's distribution as a formula, then text one token at a time.

    p        = softmax(logits / temperature)              temperature 0: all mass on the argmax (greedy)
    p        = p on its top_k largest tokens, renormalised
    p        = p on the nucleus, renormalised: the fewest most-probable tokens whose total reaches top_p
               (Holtzman et al. 2019, "The Curious Case of Neural Text Degeneration")
    token    ~ p                                           a NumPy Generator: a seed reproduces a sample

`generate` streams: it yields each new token as soon as it is drawn. It feeds the prompt once and then
one token at a time through the model's key/value cache (GPT.new_cache), so a step costs one position,
not the whole context.

The context window. A GPT with learned positions has positions 0 .. block_size-1 only, so the model
sees at most the last block_size tokens. nanoGPT's generate crops to the last block_size tokens and runs
the full forward for every token: once the context is full, each new token shifts every position, so no
cached key or value stays valid. Here, when the window is full, the context restarts from its last
block_size // 2 tokens (fed at once into a new cache) and grows again one token at a time: the model sees
between block_size // 2 and block_size tokens (nanoGPT's: block_size, once there are that many), and a
full forward runs once every block_size // 2 tokens instead of every token. Measured on nanoGPT's CPU
recipe (block 64, 1 thread): a 64-token forward costs 5.3-6.1 ms and a cached one-token step 0.19-0.27 ms
with the gpt_kernel trick (2-3.4 ms on the plain path), so a token costs ~1/15 of what nanoGPT's policy
would (~1/2 on the plain path).

use_cache=False is the oracle the cached path must equal (tests/test_gpt_sampling.py): the full forward
of the same window for every token.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tinygrad_lite import Tensor, no_grad
from tinygrad_lite.checks import int_at_least, number, positive_int
from tinygrad_lite.fast import TRICKS

from ..fast import gpt_kernel
from .model import GPT


def check_sampling(op: str, temperature, top_k, top_p) -> tuple[float, int | None, float | None]:
    """(temperature, top_k, top_p) as checked numbers: temperature finite and >= 0, top_k a positive
    int or None, top_p in (0, 1] or None; else an error naming `op` and the argument."""
    temperature = number(op, "temperature", temperature, low=0)
    top_k = None if top_k is None else positive_int(op, "top_k", top_k)
    top_p = None if top_p is None else number(op, "top_p", top_p, low=0, high=1, low_open=True)
    return temperature, top_k, top_p


def next_token_probs(logits, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> np.ndarray:
    """The distribution the next token is drawn from, over the last axis of `logits` (..., V), float64.

    softmax(logits / temperature); then only the top_k most probable tokens (ties: the lower id first);
    then only the nucleus, the most probable tokens, in order, until their total reaches top_p (the token
    that reaches it included); renormalised after each cut. temperature=0 is greedy: probability 1 on
    the first largest logit. top_k=None and top_p=None (or 1) cut nothing.
    """
    temperature, top_k, top_p = check_sampling("next_token_probs", temperature, top_k, top_p)
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim == 0 or z.shape[-1] == 0:
        raise ValueError(f"next_token_probs: logits must have a last axis of one score per token, got shape {z.shape}")
    if np.isnan(z).any():
        raise ValueError("next_token_probs: the logits contain NaN")
    if temperature == 0:
        return _one_hot(np.argmax(z, axis=-1), z.shape)
    top = z.max(axis=-1, keepdims=True)
    p = np.exp((z - top) / temperature)                     # softmax(z / T), the max shifted to 0 first
    p /= p.sum(axis=-1, keepdims=True)
    if top_k is None and (top_p is None or top_p == 1):
        return p
    order = np.argsort(-p, axis=-1, kind="stable")          # most probable first, ties by id
    ranked = np.take_along_axis(p, order, axis=-1)
    if top_k is not None:
        ranked[..., top_k:] = 0
        ranked /= ranked.sum(axis=-1, keepdims=True)
    if top_p is not None and top_p < 1:
        total = np.cumsum(ranked, axis=-1)
        before = np.concatenate([np.zeros_like(total[..., :1]), total[..., :-1]], axis=-1)  # the more probable's mass
        ranked[before >= top_p] = 0                         # the total reached top_p before them
        ranked /= ranked.sum(axis=-1, keepdims=True)
    probs = np.empty_like(p)
    np.put_along_axis(probs, order, ranked, axis=-1)
    return probs


def _one_hot(index: np.ndarray, shape: tuple) -> np.ndarray:
    return (np.arange(shape[-1]) == np.expand_dims(index, -1)).astype(np.float64)


def draw(probs: np.ndarray, rng: np.random.Generator) -> int:
    """One token id drawn from probs (V,) by inverting its cumulative sum at a uniform number: a token
    of probability 0 is never drawn."""
    cumulative = np.cumsum(probs)
    token = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    return token if token < len(probs) else int(np.flatnonzero(probs)[-1])


class Context:
    """The tokens so far and the window of them the model sees (the module's docstring: the last
    block_size tokens at most; when full, a restart from the last block_size // 2).

    logits() -> the next token's logits (V,) after the window; append(token) adds a token. With
    use_cache, logits() feeds only the window's tokens the cache has not seen (the whole window after
    a restart); without, the full forward of the window (the oracle).
    """

    def __init__(self, model: GPT, ids, use_cache: bool = True):
        self.model, self.use_cache = model, use_cache
        self.block_size = model.config.block_size
        self.keep = max(1, self.block_size // 2)
        self.tokens = _prompt(model, ids)
        self.start = max(0, len(self.tokens) - self.block_size)   # nanoGPT's crop of a long prompt
        self.fed = 0                                               # the window's tokens in the cache
        self.cache, self.kernel = None, None
        if use_cache and TRICKS.gpt_kernel and gpt_kernel.supports(model):  # the cached forward as one Numba
            self.kernel = gpt_kernel.GPTKernel(model)                        # call (fast.py)

    def append(self, token: int) -> None:
        self.tokens.append(int(token))
        if len(self.tokens) - self.start > self.block_size:      # the window is full: restart it
            self.start, self.fed = len(self.tokens) - self.keep, 0

    def window(self) -> np.ndarray:
        """The tokens the model sees, (1, T)."""
        return np.array([self.tokens[self.start:]], dtype=np.int64)

    def logits(self) -> np.ndarray:
        """The next token's logits (V,) after the window."""
        window = self.window()
        if not self.use_cache:
            with no_grad():
                return self.model(window).data[0, -1]                  # the oracle: the full forward
        new, start = window[:, self.fed:], self.fed                    # the tokens the cache has not seen
        self.fed = window.shape[1]
        if self.kernel is not None:
            return self.kernel.forward(new[0], start)
        if start == 0:
            self.cache = self.model.new_cache()
        with no_grad():
            return self.model(new, self.cache).data[0, -1]


def _prompt(model: GPT, ids) -> list:
    """The prompt's token ids as a list of ints: ids (T,) or (1, T), T >= 1, each in the vocabulary."""
    ids = np.asarray(ids.data if isinstance(ids, Tensor) else ids)
    if ids.ndim == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"generate: the prompt must be token ids of shape (T,) or (1, T) with T >= 1, "
                         f"got shape {ids.shape}")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"generate: the prompt must be integer token ids, got dtype {ids.dtype}")
    vocab = model.config.vocab_size
    outside = ids[(ids < 0) | (ids >= vocab)]
    if outside.size:
        raise ValueError(f"generate: token id {int(outside[0])} is outside the vocabulary [0, {vocab - 1}]")
    return [int(i) for i in ids]


def generate(model: GPT, ids, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None, seed: int | None = None, use_cache: bool = True) -> Iterator[int]:
    """An iterator over max_new_tokens new token ids after the prompt `ids` ((T,) or (1, T)), each
    yielded as soon as it is drawn from next_token_probs(logits, temperature, top_k, top_p).

    The same seed gives the same tokens. The model runs under no_grad, in eval mode while the iterator
    runs (its mode comes back when the iterator ends or is closed). use_cache=False: the oracle, a full
    forward of the window per token (the module's docstring has the window's policy).
    """
    if not isinstance(model, GPT):
        raise TypeError(f"generate: expected a GPT, got {type(model).__name__}")
    max_new_tokens = int_at_least("generate", "max_new_tokens", max_new_tokens, 0)
    temperature, top_k, top_p = check_sampling("generate", temperature, top_k, top_p)
    seed = None if seed is None else int_at_least("generate", "seed", seed, 0)
    context = Context(model, ids, use_cache)
    return _tokens(context, max_new_tokens, temperature, top_k, top_p, np.random.default_rng(seed))


def _tokens(context: Context, max_new_tokens: int, temperature, top_k, top_p, rng) -> Iterator[int]:
    model = context.model
    was_training = model.training
    model.eval()
    try:
        for _ in range(max_new_tokens):
            token = draw(next_token_probs(context.logits(), temperature, top_k, top_p), rng)
            context.append(token)
            yield token
    finally:
        if was_training:
            model.train()
