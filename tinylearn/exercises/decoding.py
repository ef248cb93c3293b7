"""Exercises 18-19, decoding (transformer/decoding.py): greedy decoding that feeds a key/value cache one token
per step, and one step of beam search. Each ends with the paper's Transformer decoded by it."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from transformer import decoding

from ..exercise import Case, Check, Exercise, Mistake
from ..grading import close
from .beam_run import beam_matches
from .decoding_runs import BOS, EOS, PAD, ToyDecoder, decode_matches, greedy_variant


def project_greedy(decode_step, batch, bos_id, eos_id, pad_id, max_len):
    """CachedSteps.greedy, the project's loop, driving `decode_step` as its cached step."""
    steps = SimpleNamespace(step=lambda prefix: decode_step(prefix[:, -1:], prefix.shape[1] - 1),
                            src_mask=np.zeros((batch, 1)))
    return decoding.CachedSteps.greedy(steps, bos_id, eos_id, pad_id, max_len)


def call_greedy(fn, case):
    batch, vocab, seed, max_len = case.args
    tokens, scores = fn(ToyDecoder(batch, vocab, seed), batch, BOS, EOS, PAD, max_len)
    return np.asarray(tokens), np.asarray(scores, dtype=np.float64)


def _greedy_as_if(**mistake):
    def spots(c, e, g):
        batch, vocab, seed, max_len = c.args
        wrong = greedy_variant(ToyDecoder(batch, vocab, seed), batch, BOS, EOS, PAD, max_len, **mistake)
        return close(wrong[0], g[0]) and close(wrong[1], g[1])
    return spots


def _refused(words):
    return lambda c, e, g: isinstance(g, ValueError) and words in str(g)


GREEDY = Exercise(
    number=18, name="greedy_decode", title="greedy decoding with a key/value cache",
    reads="transformer/decoding.py (greedy_decode, CachedSteps)", function="greedy_decode",
    stub='''def greedy_decode(decode_step, batch, bos_id, eos_id, pad_id, max_len):
    """Decode `batch` sentences one token at a time, each step taking the likeliest token.

    decode_step(tokens, position) -> log-probs (batch, V) of the next token. Its decoder keeps the keys and
    values of every token fed so far (the key/value cache), so feed each token once: tokens is (batch, 1),
    each row's newest token, and position its index (0 for <bos>, which every row starts with).
    A row that produced <eos> is done: afterwards it gets pad_id and adds nothing to its score. Stop when
    every row is done, or after max_len tokens.
    Returns (tokens (batch, steps taken) without <bos>, each row's total log-prob (batch,)).
    """''',
    hints=("Keep the tokens so far, prefix, starting as a column of bos_id; each step feeds prefix[:, -1:], "
           "at position prefix.shape[1] − 1.",
           "The next token is logp.argmax(-1); its log-prob logp[np.arange(batch), next] adds to the score of "
           "the rows not done yet.",
           "Track done |= next == eos_id; rows already done get pad_id; break when done.all()."),
    solution=project_greedy, shown=decoding.decode_loop,
    why="With the cache, a step runs the decoder on one new token instead of the whole prefix, so a sentence "
        "costs O(T) decoder steps of one token rather than O(T²) positions; rows that finish are padded so "
        "the batch stays one array.",
    cases=lambda: [Case(f"{b} sentence{'s' if b > 1 else ''}, max_len {n}", (b, 7, seed, n))
                   for b, n, seed in ((1, 1, 0), (1, 6, 1), (3, 8, 2), (4, 8, 3), (5, 10, 4))],
    call=call_greedy,
    mistakes=(
        Mistake("the whole prefix fed again", "the cache already holds the earlier tokens: feed only each row's "
                "newest one, prefix[:, -1:].", _refused("expected each row's newest token")),
        Mistake("positions off by one", "<bos> is at position 0: the newest token's position is "
                "prefix.shape[1] − 1.", _refused("tokens are cached")),
        Mistake("no padding after <eos>", "a row that is done gets pad_id, not its argmax.",
                _greedy_as_if(pad_after=False)),
        Mistake("scores counted after <eos>", "a done row adds nothing to its score.",
                _greedy_as_if(score_after=True)),
        Mistake("a stop at the first <eos>", "stop when every row is done (done.all()), not the first.",
                _greedy_as_if(stop="any")),
        Mistake("no early stop", "once every row is done, stop: the result has as many columns as steps taken.",
                _greedy_as_if(stop="never")),
    ),
    checks=(Check("the end-to-end run (your loop decodes a Transformer with its cache as greedy_decode does)",
                  decode_matches),),
    no_picture="a decoding loop makes no graph (it runs without gradients), and viz has no plot of a search; "
               "`python -m viz explore` shows a trained model's decoding step by step.",
)


def project_beam_step(scores, logp, beam_size):
    """The ranking in the project's beam step (advance): the best totals by best_first, largest first,
    ties in index order, each flat index split into (row, token)."""
    total = scores[:, None] + logp
    flat = decoding.best_first(total.reshape(-1), beam_size)
    rows, tokens = np.divmod(flat, logp.shape[1])
    return rows, tokens, total.reshape(-1)[flat]


def beam_cases():
    rng = np.random.default_rng(0)

    def case(label, k, V, beam, tags=()):
        logp = rng.standard_normal((k, V)) - 2
        return Case(label, (np.sort(rng.standard_normal(k))[::-1] - np.arange(k), logp, beam), tags=frozenset(tags))
    tied = Case("2 hypotheses, 3 tokens, tied totals, beam 3", (np.array([-1.0, -1.0]), np.log(np.full((2, 3), 1 / 3)),
                3), tags=frozenset({"ties"}))
    return [case("no hypothesis alive (0, 5), beam 2", 0, 5, 2), case("the first step: 1 hypothesis, 5 tokens, beam 3",
            1, 5, 3), case("1 hypothesis, 2 tokens, beam 4 (fewer candidates than the beam)", 1, 2, 4), tied,
            case("2 hypotheses, 4 tokens, beam 2", 2, 4, 2), case("3 hypotheses, 6 tokens, beam 4", 3, 6, 4),
            case("4 hypotheses, 9 tokens, beam 4", 4, 9, 4)]


def _by(key, descending=True, divisor=None):
    def ranked(scores, logp, beam):
        total = scores[:, None] + logp
        values = key(scores, logp).reshape(-1)
        flat = np.argsort(-values if descending else values, kind="stable")[:beam]
        rows, tokens = np.divmod(flat, divisor(logp) if divisor else logp.shape[1])
        return rows, tokens, total.reshape(-1)[flat]
    return ranked


def _per_row(scores, logp, beam):
    total = scores[:, None] + logp
    rows = np.arange(len(scores))
    tokens = total.argmax(axis=1)
    order = np.argsort(-total[rows, tokens], kind="stable")[:beam]
    return rows[order], tokens[order], total[rows, tokens][order]


def _spots_like(wrong):
    def spots(c, e, g):
        w = wrong(*c.args)
        return all(close(a, b) for a, b in zip(w, g)) and not all(close(a, b) for a, b in zip(e, g))
    return spots


BEAM_STEP = Exercise(
    number=19, name="beam_step", title="one step of beam search",
    reads="transformer/decoding.py (beam_search_batch, advance)", function="beam_step",
    stub='''def beam_step(scores, logp, beam_size):
    """Extend k hypotheses by one token and keep the best beam_size of all k·V extensions.

    scores: (k,) each alive hypothesis's log-prob so far; logp: (k, V) its next token's log-probs.
    An extension's total is scores[row] + logp[row, token]. Returns (rows, tokens, totals), three arrays
    of n = min(beam_size, k·V) entries, best total first; equal totals keep the order of their flat index
    row·V + token. (The project's step then retires extensions that end in <eos>.)
    """''',
    hints=("total = scores[:, None] + logp, then rank all k·V of them at once: total.reshape(-1).",
           'np.argsort(-flat, kind="stable")[:beam_size] gives the best first, ties in index order.',
           "Each flat index is row·V + token: rows, tokens = np.divmod(index, V)."),
    solution=project_beam_step, shown=decoding.advance,
    why="Ranking all k·V extensions together is what makes it a beam rather than k greedy searches; the "
        "project sorts only the values at least as large as the 2·beam-th (np.partition), and ranks 2·beam of "
        "them so that enough survive after the <eos> ones retire.",
    cases=beam_cases,
    mistakes=(
        Mistake("ranked by the new token alone", "rank by the total, scores[row] + logp[row, token]: a "
                "hypothesis's past counts.", _spots_like(_by(lambda s, lp: np.broadcast_to(lp, lp.shape)))),
        Mistake("the best token of each row only", "rank all k·V extensions together: two may come from one row.",
                _spots_like(_per_row)),
        Mistake("the worst first", "log-probs are ≤ 0 and the best is the largest: sort descending.",
                _spots_like(_by(lambda s, lp: s[:, None] + lp, descending=False))),
        Mistake("row and token from the wrong divisor", "the flat index is row·V + token: divmod by V, the "
                "number of tokens.", _spots_like(_by(lambda s, lp: s[:, None] + lp,
                                                     divisor=lambda lp: max(lp.shape[0], 1)))),
    ),
    checks=(Check("the end-to-end run (a beam search built on your step decodes a small trained Transformer as "
                  "beam_search does)", beam_matches),),
    no_picture="a beam step ranks numbers and makes no graph, and viz has no plot of a beam; "
               "`python -m viz explore` shows a trained model's decoding.",
)

EXERCISES = (GREEDY, BEAM_STEP)
