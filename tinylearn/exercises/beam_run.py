"""The beam step's end-to-end run: a beam search for one sentence built around the learner's beam_step, on
the copy task's Transformer trained for 60 steps to copy five tokens then <eos> (unsure enough that beam
search beats greedy on four of its six sentences), must give transformer.decoding.beam_search's tokens and
log-prob. Its rules are the project's: rank 2·beam extensions, an <eos> one finishes (never at the first
step), the best `beam` others live on, stop once `beam` have finished and none alive can beat them, scores
divided by length^penalty, and greedy's translation is always a candidate."""
from __future__ import annotations

import contextlib
import functools

import numpy as np

from tinygrad_lite import Tensor, no_grad
from tinygrad_lite.fast import plain
from transformer.decoding import beam_search, greedy_decode
from transformer.masks import causal_mask, padding_mask

from .copy_task import BOS, EOS, LENGTH, VOCAB, build_copier, train

BEAM, MAX_LEN, PENALTY, STEPS = 3, 7, 0.6, 60


@functools.lru_cache(maxsize=1)
def trained_copier():
    """The copy task's model after 60 steps (each copy ending in <eos>) with the project's pieces, in eval
    mode, and 6 sentences to decode."""
    model, opt, lr_schedule, rng = build_copier()
    with plain():
        train(model, opt, lr_schedule, rng, contextlib.nullcontext(), STEPS, eos=True)
    return model.eval(), np.random.default_rng(1).integers(3, VOCAB, size=(6, LENGTH))


def next_logp(model, memory, src_mask, prefix):
    """(k, V) log-probs of the token after each of the k prefixes, the decoder run on the whole prefix."""
    k, t = prefix.shape
    logits = model.decode(Tensor(np.repeat(memory.data, k, 0)), np.repeat(src_mask, k, 0), prefix,
                          tgt_mask=causal_mask(t))
    return logits[:, -1].log_softmax(-1).data


def extend(step, t, prefix, scores, logp, finished):
    """One step: the learner's ranking of 2·BEAM extensions; <eos> ones join `finished` as (score, log-prob,
    tokens); returns the rows, tokens and totals of the best BEAM others."""
    keep = ([], [], [])
    for row, token, total in zip(*step(scores, logp, 2 * BEAM)):
        if int(token) == EOS:
            if t > 0:
                tokens = np.append(prefix[int(row), 1:], EOS)
                finished.append((total / len(tokens) ** PENALTY, total, tokens))
        else:
            for kept, value in zip(keep, (int(row), int(token), total)):
                kept.append(value)
        if len(keep[0]) == BEAM:
            break
    return keep


@no_grad()
def beam_with(step, model, src):
    """(tokens, log-prob) of the best hypothesis of beam search on `src` (S,), ranked by `step`."""
    src = src[None]
    src_mask = padding_mask(src, model.config.pad_id)
    memory = model.encode(src, src_mask)
    prefix, scores, finished = np.full((1, 1), BOS), np.zeros(1), []
    for t in range(MAX_LEN):
        rows, tokens, totals = extend(step, t, prefix, scores, next_logp(model, memory, src_mask, prefix), finished)
        best_alive = max((s / (t + 1) ** PENALTY for s in totals), default=-np.inf)
        if not rows or (len(finished) >= BEAM and max(f[0] for f in finished) >= best_alive):
            break
        prefix, scores = np.concatenate([prefix[rows], np.array(tokens)[:, None]], axis=1), np.array(totals)
    else:
        finished += [(s / (prefix.shape[1] - 1) ** PENALTY, s, row[1:]) for s, row in zip(scores, prefix)]
    greedy, greedy_score = greedy_decode(model, src, BOS, EOS, MAX_LEN)
    row = [int(x) for x in greedy[0]]
    greedy_tokens = np.array(row[:row.index(EOS) + 1] if EOS in row else row)
    finished.append((greedy_score[0] / len(greedy_tokens) ** PENALTY, greedy_score[0], greedy_tokens))
    _, logp, tokens = max(finished, key=lambda f: f[0])
    return [int(x) for x in tokens], float(logp)


def beam_matches(fn):
    """A Check.run result: None if the beam search built on fn gives beam_search's best hypothesis for each
    sentence; else the first that differs."""
    model, sentences = trained_copier()
    with plain():
        for src in sentences:
            tokens, logp, _ = beam_search(model, src, BOS, EOS, BEAM, MAX_LEN, PENALTY)
            expected = ([int(x) for x in tokens], float(logp))
            try:
                got = beam_with(fn, model, src)
            except Exception as error:  # the learner's step broke the search: that is the answer to report
                got = error
            if isinstance(got, Exception) or got[0] != expected[0] or not np.isclose(got[1], expected[1], rtol=1e-9,
                                                                                    atol=1e-12):
                return (f"the end-to-end run: beam search (beam {BEAM}, length penalty {PENALTY}) of the copy task's "
                        f"trained Transformer on {src.tolist()}, built on your step", expected, got, ())
    return None
