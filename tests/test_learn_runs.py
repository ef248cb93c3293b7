"""tinylearn's end-to-end runs use the learner's piece: with the project's own piece a run equals the plain
one, or learns; with a piece that does nothing useful it fails, and says what it got."""
import contextlib

import numpy as np

from tinygrad_lite.fast import plain
from tinylearn.exercises.copy_task import copy_task, copy_task_check
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
