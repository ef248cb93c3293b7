"""Turning a trained model into sentences: greedy, beam search and temperature sampling.

All three run the decoder incrementally with a key/value cache: each step feeds only
the newest token, and reuses earlier positions' keys/values and the encoder memory's
projected K/V. `use_cache=False` re-runs the decoder on the whole prefix instead
(what torch.nn.Transformer users do); both give the same tokens.
"""
from __future__ import annotations

import contextlib

import numpy as np

from tinygrad_lite import Tensor, is_grad_enabled, kernels, no_grad

from .masks import padding_mask


class KeyValueBuffer(dict):
    """One self-attention layer's cache: "k", "v" hold the keys/values of the positions so far.

    `MultiHeadAttention` calls `extend` with each step's new keys/values. Tensor.cat would copy
    the whole prefix every step (quadratic in the length); here the arrays grow inside a buffer
    with spare room, doubling when full, so a step copies only its new token, and "k" is a view
    of the buffer's filled part (the attention kernel reads it in place). If "k" was replaced
    (beam search reorders the rows), the buffer is rebuilt from it. With autograd, Tensor.cat.
    """

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        old_k, old_v = self["k"], self["v"]
        if is_grad_enabled() and (k.requires_grad or v.requires_grad or old_k.requires_grad
                                  or old_v.requires_grad):
            return Tensor.cat([old_k, k], dim=1), Tensor.cat([old_v, v], dim=1)
        return self._grow("k", old_k, k), self._grow("v", old_v, v)

    def _grow(self, name: str, old: Tensor, fresh: Tensor) -> Tensor:
        start, new = old.shape[1], fresh.shape[1]
        buffer = self.get(f"_{name}_buffer")
        if (buffer is None or old.data.base is not buffer or buffer.shape[1] < start + new
                or buffer.shape[0] != old.shape[0] or buffer.dtype != fresh.dtype):
            capacity = max(2 * (start + new), 16)
            buffer = np.empty((old.shape[0], capacity) + old.shape[2:], dtype=fresh.dtype)
            buffer[:, :start] = old.data
            self[f"_{name}_buffer"] = buffer
        buffer[:, start:start + new] = fresh.data
        return Tensor(buffer[:, :start + new])


def _new_cache(model) -> list:
    """The model's empty per-layer caches, with a growing buffer for each self-attention."""
    return [{**layer, "self": KeyValueBuffer()} for layer in model.new_cache()]


def _encode(model, src):
    src = np.asarray(src.data if isinstance(src, Tensor) else src)
    if src.ndim == 1:
        src = src[None]
    src_mask = padding_mask(src, model.config.pad_id)
    return src, src_mask, model.encode(src, src_mask)


def _step(model, memory, src_mask, prefix: np.ndarray, cache, use_cache: bool) -> np.ndarray:
    """Log-probabilities of the next token after `prefix` (B, t): (B, V)."""
    if use_cache:
        t = prefix.shape[1] - 1
        logits = model.decode(memory, src_mask, prefix[:, -1:], cache=cache, start=t)
    else:
        logits = model.decode(memory, src_mask, prefix)
    return kernels.log_softmax_forward(logits.data[:, -1])


@contextlib.contextmanager
def _eval_mode(model):
    """Decode with dropout off, then give the model back in the mode it had."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()


def _decode_loop(model, src, bos_id: int, eos_id: int, max_len: int, choose, use_cache: bool = True):
    """Run the decoder one token at a time; choose(log_probs (B, V)) -> next ids (B,).
    Returns (tokens (B, ≤max_len) without <bos>, their total log-prob (B,)); rows that
    produced <eos> are padded with pad_id afterwards."""
    src, src_mask, memory = _encode(model, src)
    B = src.shape[0]
    prefix = np.full((B, 1), bos_id, dtype=np.int64)
    cache = _new_cache(model) if use_cache else None
    done = np.zeros(B, dtype=bool)
    score = np.zeros(B)
    for _ in range(max_len):
        logp = _step(model, memory, src_mask, prefix, cache, use_cache)
        nxt = choose(logp)
        score += np.where(done, 0.0, logp[np.arange(B), nxt])
        nxt = np.where(done, model.config.pad_id, nxt)
        prefix = np.concatenate([prefix, nxt[:, None]], axis=1)
        done |= nxt == eos_id
        if done.all():
            break
    return prefix[:, 1:], score


@no_grad()
def greedy_decode(model, src, bos_id: int, eos_id: int, max_len: int = 50, use_cache: bool = True):
    """src: (B, S) or (S,) ids -> (tokens (B, ≤max_len) without <bos>, total log-prob (B,)).
    Rows that produced <eos> are padded with pad_id afterwards."""
    with _eval_mode(model):
        return _decode_loop(model, src, bos_id, eos_id, max_len, lambda logp: logp.argmax(-1), use_cache)


@no_grad()
def sample_decode(model, src, bos_id: int, eos_id: int, temperature: float = 1.0, max_len: int = 50,
                  seed: int | None = None):
    """Sample each token from softmax(logits / T): T→0 approaches greedy, T→∞ uniform
    (the article's temperature). Returns tokens (B, ≤max_len)."""
    if not temperature > 0:
        raise ValueError(f"sample_decode: temperature must be > 0, got {temperature}")
    rng = np.random.default_rng(seed)

    def sample(logp):  # softmax(logits / T) = softmax(log_softmax(logits) / T)
        z = logp.astype(np.float64) / temperature
        p = np.exp(z - z.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return np.array([rng.choice(len(row), p=row) for row in p])

    with _eval_mode(model):
        return _decode_loop(model, src, bos_id, eos_id, max_len, sample)[0]


def _reorder_cache(cache: list, beams: np.ndarray):
    for layer in cache:
        self_kv = layer.get("self", {})
        for key in ("k", "v"):
            if key in self_kv:
                self_kv[key] = self_kv[key][beams]


@no_grad()
def beam_search(model, src, bos_id: int, eos_id: int, beam_size: int = 4, max_len: int = 50,
                length_penalty: float = 1.0):
    """Beam search for one sentence (src: (S,) or (1, S)). Finished hypotheses are ranked
    by log-prob / length**length_penalty (length normalisation, as GNMT/fairseq). The greedy
    translation is always one of the candidates, so beam search never returns a hypothesis
    that scores below greedy's (a narrow beam can otherwise prune greedy's path).
    Returns (tokens, log-prob, normalised score) of the best hypothesis."""
    if not isinstance(beam_size, (int, np.integer)) or beam_size < 1:
        raise ValueError(f"beam_search: beam_size must be an int >= 1, got {beam_size!r}")
    with _eval_mode(model):
        src, src_mask, memory = _encode(model, src)
        if src.shape[0] != 1:
            raise ValueError(f"beam_search: decodes one sentence at a time, got a batch of {src.shape[0]}")
        prefix = np.full((1, 1), bos_id, dtype=np.int64)
        scores = np.zeros(1)
        cache = _new_cache(model)
        finished = []  # (normalised score, log-prob, tokens)

        def norm(logp, length):
            return logp / (length ** length_penalty)

        for step in range(max_len):
            k = prefix.shape[0]
            logp = _step(model, memory.expand(k, *memory.shape[1:]) if k > 1 else memory,
                         src_mask if k == 1 else np.broadcast_to(src_mask, (k,) + src_mask.shape[1:]),
                         prefix, cache, True)
            V = logp.shape[1]
            total = (scores[:, None] + logp).reshape(-1)
            order = np.argsort(-total, kind="stable")[: 2 * beam_size]
            keep_beams, keep_tokens, keep_scores = [], [], []
            for flat in order:
                beam, token = divmod(int(flat), V)
                if token == eos_id:
                    finished.append((norm(total[flat], step + 1), total[flat],
                                     np.append(prefix[beam, 1:], token)))
                else:
                    keep_beams.append(beam)
                    keep_tokens.append(token)
                    keep_scores.append(total[flat])
                if len(keep_beams) == beam_size:
                    break
            best_finished = max((f[0] for f in finished), default=-np.inf)
            best_alive = max((norm(s, step + 1) for s in keep_scores), default=-np.inf)
            if not keep_beams or (len(finished) >= beam_size and best_finished >= best_alive):
                break
            beams = np.array(keep_beams)
            _reorder_cache(cache, beams)
            prefix = np.concatenate([prefix[beams], np.array(keep_tokens)[:, None]], axis=1)
            scores = np.array(keep_scores)
        else:
            for b in range(prefix.shape[0]):
                finished.append((norm(scores[b], prefix.shape[1] - 1), scores[b], prefix[b, 1:]))
        greedy, greedy_score = greedy_decode(model, src, bos_id, eos_id, max_len)
        row = [int(t) for t in greedy[0]]
        tokens = np.array(row[:row.index(eos_id) + 1] if eos_id in row else row)
        finished.append((norm(greedy_score[0], len(tokens)), greedy_score[0], tokens))
        best = max(finished, key=lambda f: f[0])
        return best[2], float(best[1]), float(best[0])
