"""tinylearn's end-to-end runs use the learner's piece: with the project's own piece a run equals the plain
one, or learns; with a piece that does nothing useful it fails, and says what it got."""
import contextlib

import numpy as np
import pytest
from learn_mutants import MUTANTS

from tinygrad_lite import Tensor
from tinygrad_lite.fast import plain
from tinygrad_lite.nn import functional
from tinylearn import find
from tinylearn.exercises.beam_run import BEAM, MAX_LEN, PENALTY, beam_matches, trained_copier
from tinylearn.exercises.copy_task import BOS, EOS, copy_task, copy_task_check
from tinylearn.exercises.loss_run import loss_run_check, your_loss
from transformer.decoding import beam_search, greedy_decode
from transformer.positional_encoding import sinusoidal_table

NONE = contextlib.nullcontext


def test_the_projects_table_trains_the_copy_task_exactly_as_the_model_does():
    with plain():
        assert copy_task(NONE(), table=lambda n, d: sinusoidal_table(n, d, np.float64)) == copy_task(NONE())


def test_a_table_of_zeros_gives_the_model_no_positions_and_the_run_fails():
    with plain():
        failure = copy_task_check(NONE(), table=lambda n, d: np.zeros((n, d)))
    assert failure is not None and "of the tokens right" in failure[2]


def test_a_schedule_of_zero_learns_nothing_and_the_run_fails():
    with plain():
        first, last, _ = copy_task(NONE(), schedule=lambda step, d_model, warmup: 0.0)
        assert copy_task_check(NONE(), schedule=lambda step, d_model, warmup: 0.0) is not None
    assert abs(last - first) < 0.1 * first  # the weights never moved: only the batches differ


def test_the_learners_dropout_runs_in_training_and_not_in_decoding():
    calls = []

    def identity(x, p, training, rng):
        calls.append(training)
        return x
    with plain():
        copy_task(NONE(), dropout=identity, steps=2)
    assert calls.count(True) >= 2 * 4 and False in calls  # every Dropout module, each step; then decoding


def test_a_dropout_that_drops_everything_fails_the_run():
    with plain():
        assert copy_task_check(NONE(), dropout=lambda x, p, training, rng: np.zeros_like(x)) is not None


def test_the_beam_run_matches_beam_search_with_the_projects_step_and_beats_greedy_somewhere():
    model, sentences = trained_copier()
    assert beam_matches(find("beam_step").solution) is None
    with plain():
        greedy, _ = greedy_decode(model, sentences, BOS, EOS, MAX_LEN)
        beams = [beam_search(model, src, BOS, EOS, BEAM, MAX_LEN, PENALTY)[0] for src in sentences]
    cut = [[int(t) for t in row[:list(row).index(EOS) + 1 if EOS in row else len(row)]] for row in greedy]
    assert sum([int(t) for t in beam] != row for beam, row in zip(beams, cut)) >= 2


@pytest.mark.parametrize("mutant, mistake", MUTANTS["beam_step"], ids=[m for _, m in MUTANTS["beam_step"]])
def test_the_beam_run_alone_rejects_every_wrong_step(mutant, mistake):
    failure = beam_matches(mutant)
    assert failure is not None and failure[0].startswith("the end-to-end run: beam search")


def test_the_loss_run_trains_on_the_learners_loss_as_on_the_engines():
    """Its gradient by finite differences of the project's loss gives the engine's run; a loss twice as large
    (a gradient twice as large) does not."""
    assert loss_run_check(find("cross_entropy").solution) is None
    failure = loss_run_check(lambda logits, targets, eps: 2 * find("cross_entropy").solution(logits, targets, eps))
    assert failure is not None and "trained 50 steps on your loss" in failure[0]


def test_the_loss_runs_gradient_is_the_engines_to_a_millionth():
    rng = np.random.default_rng(0)
    logits, targets = rng.standard_normal((6, 8)), rng.integers(0, 8, 6)
    engine = Tensor(logits, requires_grad=True)
    functional.cross_entropy(engine, targets, label_smoothing=0.1).backward()
    yours = Tensor(logits, requires_grad=True)
    with plain(), your_loss(find("cross_entropy").solution):
        functional.cross_entropy(yours, targets, label_smoothing=0.1).backward()
    assert np.allclose(yours.grad, engine.grad, atol=1e-6)
