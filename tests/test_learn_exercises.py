"""tinylearn's exercises, each: the blank file fails (not written yet), the project's own solution
passes, and every mutant in tests/learn_mutants.py fails with its mistake named."""
import pytest
from learn_mutants import MUTANTS

import tinylearn
from tinylearn.exercises import EXERCISES
from tinylearn.workfolder import file_text

NAMES = [e.name for e in EXERCISES]
CASES = [(name, mutant, mistake) for name in NAMES for mutant, mistake in MUTANTS.get(name, [])]


def blank(exercise):
    """The learner's function as `start` writes it: the stub, untouched."""
    scope = {}
    exec(compile(file_text(exercise), f"{exercise.number:02d}_{exercise.name}.py", "exec"), scope)
    return scope[exercise.function]


def test_there_are_exercises_in_reading_order_with_softmax_sixth():
    assert [e.number for e in EXERCISES] == list(range(1, len(EXERCISES) + 1))
    assert tinylearn.find(6).name == "softmax" and tinylearn.find("softmax").number == 6


@pytest.mark.parametrize("name", NAMES)
def test_every_exercise_lists_at_least_three_mistakes_each_with_a_mutant(name):
    exercise = tinylearn.find(name)
    assert len(exercise.mistakes) >= 3
    assert sorted(mistake for _, mistake in MUTANTS[name]) == sorted(m.name for m in exercise.mistakes)


@pytest.mark.parametrize("name", NAMES)
def test_the_blank_fails_as_not_written(name):
    report = tinylearn.check(name, blank(tinylearn.find(name)))
    assert not report and "not written yet" in str(report)


@pytest.mark.parametrize("name", NAMES)
def test_the_projects_own_solution_passes(name):
    exercise = tinylearn.find(name)
    report = tinylearn.check(name, exercise.solution)
    assert report, str(report)
    assert str(report).startswith(f"✓ {exercise.number} {name}")


@pytest.mark.parametrize("name, mutant, mistake", CASES, ids=[f"{n}-{m.__name__}" for n, m, _ in CASES])
def test_each_mutant_fails_with_its_mistake_named(name, mutant, mistake):
    report = tinylearn.check(name, mutant)
    assert not report
    assert report.mistake_names == [mistake], str(report)
    assert f"The mistake: {mistake} — " in str(report)
