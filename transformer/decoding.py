"""Turning a trained model into sentences: greedy, beam search and temperature sampling.

All three run the decoder incrementally with a key/value cache: each step feeds only
the newest token, and reuses earlier positions' keys/values and the encoder memory's
projected K/V. `use_cache=False` re-runs the decoder on the whole prefix instead
(what torch.nn.Transformer users do); both give the same tokens.

How a step runs is a strategy, `steps`: CachedSteps here, the Tensor decoder step by step. The
translator passes the fused one it picks (transformer/fast/), the same steps as Numba kernels.
"""
from __future__ import annotations

import contextlib

import numpy as np

from tinygrad_lite import Tensor, no_grad

from .kv_cache import KeyValueBuffer
from .masks import padding_mask


def _new_cache(model) -> list:
    """The model's empty per-layer caches, with a growing buffer for each self-attention."""
    return [{**layer, "self": KeyValueBuffer()} for layer in model.new_cache()]


def _source(model, src):
    """src ((B, S) or (S,) ids) as checked (B, S) ids and their padding mask (B, 1, 1, S)."""
    src = np.asarray(src.data if isinstance(src, Tensor) else src)
    if src.ndim == 1:
        src = src[None]
    src_mask = padding_mask(src, model.config.pad_id)
    return src, src_mask


def _step(model, memory, src_mask, prefix: np.ndarray, cache, use_cache: bool) -> np.ndarray:
    """Log-probabilities of the next token after `prefix` (B, t): (B, V)."""
    if use_cache:
        t = prefix.shape[1] - 1
        logits = model.decode(memory, src_mask, prefix[:, -1:], cache=cache, start=t)
    else:
        logits = model.decode(memory, src_mask, prefix)
    return logits[:, -1].log_softmax(-1).data


class CachedSteps:
    """The plain decoding steps: the encoder once, then model.decode on each row's newest token with
    the Tensor key/value cache (rows, max_len: the decode's size; the cache grows, so unused here).
    `steps=` of greedy_decode and beam_search takes another with the same methods."""

    calls_modules = True  # it runs the model's modules, so decoding turns their dropout off first

    def __init__(self, model, src: np.ndarray, src_mask: np.ndarray, rows: int | None = None,
                 max_len: int | None = None):
        memory = model.encode(src, src_mask)
        self.model, self.memory, self.src_mask, self.cache = model, memory, src_mask, _new_cache(model)
        self.step_memory, self.step_mask = memory, src_mask

    def step(self, prefix: np.ndarray, owner: np.ndarray | None = None) -> np.ndarray:
        """Log-probs (rows, V) of the next token after prefix (rows, t); row r extends sentence owner[r]."""
        return _step(self.model, self.step_memory, self.step_mask, prefix, self.cache, True)

    def reorder(self, rows: np.ndarray, length: int, owner: np.ndarray):
        """Keep the cached keys/values of `rows` (beam search's survivors, in their new order)."""
        for layer in self.cache:
            for part in ("self", "cross"):
                kv = layer.get(part, {})
                for key in ("k", "v"):
                    if key in kv:
                        kv[key] = kv[key][rows]
        self.step_memory, self.step_mask = self.memory[owner], self.src_mask[owner]

    def greedy(self, bos_id: int, eos_id: int, pad_id: int, max_len: int):
        """(tokens (B, ≤max_len) without <bos>, total log-prob (B,)): the argmax at every step."""
        return decode_loop(self.step, self.src_mask.shape[0], bos_id, eos_id, pad_id, max_len,
                            lambda logp: logp.argmax(-1))


@contextlib.contextmanager
def _eval_mode(model, needed: bool = True):
    """Decode with dropout off, then give the model back in the mode it had (not needed: steps
    that call no module, which skip the walk over every module)."""
    was_training = model.training and needed
    if needed:
        model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()


def decode_loop(step, B: int, bos_id: int, eos_id: int, pad_id: int, max_len: int, choose):
    """Decode B sentences one token at a time: step(prefix (B, t)) -> log-probs (B, V), then
    choose(log_probs) -> next ids (B,). Returns (tokens (B, ≤max_len) without <bos>, their total
    log-prob (B,)); rows that produced <eos> are padded with pad_id afterwards."""
    prefix = np.full((B, 1), bos_id, dtype=np.int64)
    done = np.zeros(B, dtype=bool)
    score = np.zeros(B)
    for _ in range(max_len):
        logp = step(prefix)
        nxt = choose(logp)
        score += np.where(done, 0.0, logp[np.arange(B), nxt])
        nxt = np.where(done, pad_id, nxt)
        prefix = np.concatenate([prefix, nxt[:, None]], axis=1)
        done |= nxt == eos_id
        if done.all():
            break
    return prefix[:, 1:], score


@no_grad()
def greedy_decode(model, src, bos_id: int, eos_id: int, max_len: int = 50, use_cache: bool = True,
                  steps=CachedSteps):
    """src: (B, S) or (S,) ids -> (tokens (B, ≤max_len) without <bos>, total log-prob (B,)).
    Rows that produced <eos> are padded with pad_id afterwards. `steps`: see CachedSteps;
    use_cache=False re-runs model.decode on the whole prefix every step instead."""
    src, src_mask = _source(model, src)
    pad_id = model.config.pad_id
    with _eval_mode(model, steps.calls_modules or not use_cache):
        if use_cache:
            return steps(model, src, src_mask, src.shape[0], max_len).greedy(bos_id, eos_id, pad_id, max_len)
        memory = model.encode(src, src_mask)
        return decode_loop(lambda prefix: _step(model, memory, src_mask, prefix, None, False), src.shape[0],
                            bos_id, eos_id, pad_id, max_len, lambda logp: logp.argmax(-1))


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

    src, src_mask = _source(model, src)
    with _eval_mode(model):
        steps = CachedSteps(model, src, src_mask)
        return decode_loop(steps.step, src.shape[0], bos_id, eos_id, model.config.pad_id, max_len, sample)[0]


class BeamTrace:
    """What beam search did, as a tree: every hypothesis it kept at each step, with its parent,
    its token and cumulative log-prob, the finished ones marked. Pass one to
    `beam_search(..., trace=BeamTrace())`; it does not change the search.

    nodes[0] is <bos>; each node is a dict (id, parent, step, token, logp, finished, greedy).
    `best` is the node of the hypothesis beam search returned. The greedy translation is always
    a candidate: where the beam had pruned its path, its nodes are added with greedy=True, their
    log-probs unknown (None) but the total's.
    """

    def __init__(self):
        self.nodes = [{"id": 0, "parent": None, "step": 0, "token": None, "logp": 0.0, "finished": False,
                       "greedy": False}]
        self.children = {}          # (parent id, token) -> child id
        self.alive = [0]            # the node of each alive row, in the rows' order
        self.best = None

    def child(self, parent: int, token: int, logp, greedy: bool = False) -> int:
        key = (parent, int(token))
        if key not in self.children:
            self.children[key] = len(self.nodes)
            self.nodes.append({"id": len(self.nodes), "parent": parent, "step": self.nodes[parent]["step"] + 1,
                               "token": int(token), "logp": None if logp is None else float(logp),
                               "finished": False, "greedy": greedy})
        return self.children[key]

    def advance(self, rows, tokens, scores) -> None:
        """The rows that live on: row `rows[j]` of the last step extended by `tokens[j]`."""
        self.alive = [self.child(self.alive[r], t, s) for r, t, s in zip(rows, tokens, scores)]

    def finish(self, tokens, logp, greedy: bool = False) -> int:
        """Mark the hypothesis `tokens` (after <bos>) finished with total log-prob `logp`."""
        node = 0
        for token in tokens:
            node = self.child(node, token, None, greedy)
        self.nodes[node].update(finished=True, logp=float(logp))
        return node


class _Hypotheses:
    """One sentence's finished hypotheses, ranked by log-prob / length**length_penalty."""

    def __init__(self, length_penalty: float, trace: BeamTrace | None = None):
        self.length_penalty, self.finished, self.trace = length_penalty, [], trace

    def norm(self, logp, length):
        return logp / (length ** self.length_penalty)

    def add(self, logp, tokens, greedy: bool = False):
        self.finished.append((self.norm(logp, len(tokens)), logp, tokens))
        if self.trace is not None:
            self.trace.finish(tokens, logp, greedy)

    def best(self):
        return max(self.finished, key=lambda f: f[0])


def best_first(values: np.ndarray, count: int) -> np.ndarray:
    """np.argsort(-values, kind="stable")[:count] (largest first, ties in index order) without
    sorting every value: only those at least the count-th largest are sorted."""
    if count < values.size:
        top = np.partition(values, values.size - count)[values.size - count:]
        if not np.isnan(top).any():  # NaN sorts last in argsort, first in partition
            candidates = np.flatnonzero(values >= top.min())
            return candidates[np.argsort(-values[candidates], kind="stable")][:count]
    return np.argsort(-values, kind="stable")[:count]


def advance(hyp: _Hypotheses, total: np.ndarray, prefix: np.ndarray, step: int, beam_size: int, eos_id: int):
    """One sentence's step: the best 2·beam extensions of its k alive rows (total: (k, V)
    log-probs so far); <eos> ones finish, the best `beam_size` others live on.
    Returns (alive rows, tokens, scores), empty once the sentence is done."""
    V = total.shape[1]
    flat_total = total.reshape(-1)
    keep = ([], [], [])
    for flat in best_first(flat_total, 2 * beam_size):
        row, token = divmod(int(flat), V)
        if token == eos_id:
            if step > 0:  # an empty translation never finishes a beam
                hyp.add(flat_total[flat], np.append(prefix[row, 1:], token))
        else:
            for kept, value in zip(keep, (row, token, flat_total[flat])):
                kept.append(value)
        if len(keep[0]) == beam_size:
            break
    best_finished = max((f[0] for f in hyp.finished), default=-np.inf)
    best_alive = max((hyp.norm(s, step + 1) for s in keep[2]), default=-np.inf)
    if not keep[0] or (len(hyp.finished) >= beam_size and best_finished >= best_alive):
        return [], [], []
    if hyp.trace is not None:
        hyp.trace.advance(*keep)
    return keep


@no_grad()
def beam_search_batch(model, src, bos_id: int, eos_id: int, beam_size: int = 4, max_len: int = 50,
                      length_penalty: float = 1.0, traces: list | None = None, steps=CachedSteps) -> list:
    """Beam search for a batch of sentences (src: (B, S) padded, or (S,)), all beams decoded as
    the rows of one batch. Finished hypotheses are ranked by log-prob / length**length_penalty
    (length normalisation, as GNMT/fairseq; the paper uses beam 4 and penalty 0.6); <eos> as the
    first token (an empty translation) is never a beam's hypothesis. The greedy
    translation is always a candidate, so beam search never returns a hypothesis that scores
    below greedy's (a narrow beam can otherwise prune greedy's path).
    `traces`: a BeamTrace per sentence to record the search in (see BeamTrace), or None.
    `steps`: how each step runs (see CachedSteps).
    Returns, per sentence, (tokens, log-prob, normalised score) of its best hypothesis."""
    if not isinstance(beam_size, (int, np.integer)) or beam_size < 1:
        raise ValueError(f"beam_search: beam_size must be an int >= 1, got {beam_size!r}")
    with _eval_mode(model):
        src, src_mask = _source(model, src)
        B = src.shape[0]
        if traces is not None and len(traces) != B:
            raise ValueError(f"beam_search: expected a trace per sentence ({B}), got {len(traces)}")
        hyps = [_Hypotheses(length_penalty, trace) for trace in (traces or [None] * B)]
        owner = np.arange(B)                                   # the sentence each alive row extends
        prefix = np.full((B, 1), bos_id, dtype=np.int64)       # (rows, t): all alive rows
        scores = np.zeros(B)
        decoder = steps(model, src, src_mask, B * beam_size, max_len)
        for step in range(max_len):
            logp = decoder.step(prefix, owner)                 # (rows, V)
            total = scores[:, None] + logp
            rows, tokens, new_scores = [], [], []
            for i in np.unique(owner):
                mine = np.flatnonzero(owner == i)
                r, t, sc = advance(hyps[i], total[mine], prefix[mine], step, beam_size, eos_id)
                rows += [mine[j] for j in r]
                tokens += t
                new_scores += sc
            if not rows:
                break
            rows = np.array(rows)
            owner, scores = owner[rows], np.array(new_scores)
            decoder.reorder(rows, step + 1, owner)
            prefix = np.concatenate([prefix[rows], np.array(tokens)[:, None]], axis=1)
        else:
            for row, i in enumerate(owner):
                hyps[i].add(scores[row], prefix[row, 1:])
        greedy, greedy_score = greedy_decode(model, src, bos_id, eos_id, max_len, steps=steps)
        return [_best_with_greedy(hyp, greedy[i], greedy_score[i], eos_id) for i, hyp in enumerate(hyps)]


def _best_with_greedy(hyp, greedy, greedy_score, eos_id: int) -> tuple:
    """(tokens, log-prob, normalised score) of a sentence's best hypothesis, greedy's among them."""
    row = [int(t) for t in greedy]
    hyp.add(greedy_score, np.array(row[:row.index(eos_id) + 1] if eos_id in row else row), greedy=True)
    norm_score, logp, tokens = hyp.best()
    if hyp.trace is not None:
        hyp.trace.best = hyp.trace.finish(tokens, logp)
    return tokens, float(logp), float(norm_score)


def beam_search(model, src, bos_id: int, eos_id: int, beam_size: int = 4, max_len: int = 50,
                length_penalty: float = 1.0, trace: BeamTrace | None = None, steps=CachedSteps):
    """Beam search for one sentence (src: (S,) or (1, S)); see `beam_search_batch`. A `trace`
    (BeamTrace) records the search as a tree. Returns (tokens, log-prob, normalised score) of the
    best hypothesis."""
    src = np.asarray(src.data if isinstance(src, Tensor) else src)
    if src.ndim == 2 and src.shape[0] != 1:
        raise ValueError(f"beam_search: decodes one sentence at a time, got a batch of {src.shape[0]}")
    return beam_search_batch(model, src, bos_id, eos_id, beam_size, max_len, length_penalty,
                             None if trace is None else [trace], steps)[0]
