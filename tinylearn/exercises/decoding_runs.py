"""What the decoding exercises run on: a stand-in decoder with a key/value cache that refuses misuse
(a whole prefix fed again, a wrong position), the greedy loop with one known mistake switched in (for the
detectors), and the end-to-end run: a learner's greedy loop on the paper's Transformer with its real
cache, against transformer.decoding.greedy_decode."""
from __future__ import annotations

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import no_grad
from transformer import Transformer
from transformer.decoding import greedy_decode
from transformer.masks import padding_mask

BOS, EOS, PAD = 1, 2, 0


class ToyDecoder:
    """decode_step(tokens (B, 1), position) -> log-probs (B, V): each row's next-token log-probs are a fixed
    function of its tokens so far, which the decoder keeps as a cache does; <eos> grows likelier with length."""

    def __init__(self, batch: int, vocab: int, seed: int):
        self.fed, self.vocab, self.seed = np.zeros((batch, 0), dtype=np.int64), vocab, seed

    def __call__(self, tokens, position):
        tokens = np.asarray(tokens)
        if tokens.shape != (self.fed.shape[0], 1):
            raise ValueError(f"decode_step: expected each row's newest token, shape ({self.fed.shape[0]}, 1), got "
                             f"{tokens.shape}: the cache holds the tokens before it")
        if position != self.fed.shape[1]:
            raise ValueError(f"decode_step: position {position}, but {self.fed.shape[1]} tokens are cached: the "
                             "newest token's position is the number of tokens before it")
        self.fed = np.concatenate([self.fed, tokens.astype(np.int64)], axis=1)
        logits = np.stack([np.random.default_rng([self.seed, i, *map(int, row)]).standard_normal(self.vocab) * 2
                           for i, row in enumerate(self.fed)]).reshape(-1, self.vocab)
        logits[:, EOS] += 0.3 * self.fed.shape[1]
        logits[:, BOS] = logits[:, PAD] = -np.inf
        shifted = logits - logits.max(axis=1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def greedy_variant(decode_step, batch, bos_id, eos_id, pad_id, max_len, pad_after=True, score_after=False,
                   stop="all"):
    """The greedy loop with a mistake switched in: no padding after <eos>, scores that keep counting, or a
    stop at the first row's <eos> ("any") or never ("never")."""
    prefix, done, score = np.full((batch, 1), bos_id, dtype=np.int64), np.zeros(batch, bool), np.zeros(batch)
    for t in range(max_len):
        logp = decode_step(prefix[:, -1:], t)
        nxt = logp.argmax(-1)
        score += np.where(done & ~score_after, 0.0, logp[np.arange(batch), nxt])
        nxt = np.where(done & pad_after, pad_id, nxt)
        prefix = np.concatenate([prefix, nxt[:, None]], axis=1)
        done |= nxt == eos_id
        if (stop == "all" and done.all()) or (stop == "any" and done.any()):
            break
    return prefix[:, 1:], score


def tiny_translator():
    """A small random Transformer (float64) and two padded source sentences."""
    tl.manual_seed(0)
    model = Transformer(9, 9, d_model=16, h=2, N=1, d_ff=32, dropout=0.0, dtype=np.float64).eval()
    src = np.array([[3, 4, 5, 6, 2], [7, 5, 2, 0, 0]])
    return model, src


@no_grad()
def decode_matches(fn, max_len: int = 8):
    """A Check.run result: None if fn's greedy loop, on the tiny Transformer's decoder with its key/value
    cache, gives greedy_decode's tokens and scores; else the failure."""
    model, src = tiny_translator()
    expected = greedy_decode(model, src, BOS, EOS, max_len=max_len)
    src_mask = padding_mask(src, model.config.pad_id)
    memory, cache = model.encode(src, src_mask), model.new_cache()

    def decode_step(tokens, position):
        return model.decode(memory, src_mask, np.asarray(tokens), cache=cache, start=position)[:, -1] \
            .log_softmax(-1).data
    got = fn(decode_step, src.shape[0], BOS, EOS, model.config.pad_id, max_len)
    same = np.array_equal(np.asarray(got[0]), expected[0]) and np.allclose(got[1], expected[1])
    if same:
        return None
    return ("the end-to-end run: greedy decoding of a small Transformer with its key/value cache",
            expected, tuple(got), ())
