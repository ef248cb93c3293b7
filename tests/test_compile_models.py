"""The step compiler on the project's models: a compiled training step of the GPT and of the translator
gives the eager step's losses and weights bit for bit, with dropout on, when the plan replays the same
ops: its rewrite rules off (with them on, tests/test_compile_oracle.py and test_compile_rules*.py)."""
import numpy as np
import pytest
from training_steps import training_step

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from tinygrad_lite.compiler import CompileError, compile
from tinygrad_lite.compiler.rules import SWITCHES as RULE_SWITCHES
from tinygrad_lite.nn import functional as F
from tinygrad_lite.optim import Adam, AdamW


def gpt_run(steps, compiled, batches):
    from transformer.gpt import GPT, GPTConfig
    tl.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=40, n_layer=2, n_head=2, n_embd=32, block_size=12, dropout=0.1, bias=True))
    params = list(model.parameters())
    opt = AdamW(params, lr=3e-3, betas=(0.9, 0.99), weight_decay=0.1)
    step = training_step(model.loss, opt, params, clip=1.0)
    run = compile(step) if compiled else step
    tl.manual_seed(1)
    losses = [run(*batches[i % len(batches)]).data.copy() for i in range(steps)]
    return losses, [p.data.copy() for p in params], run


def translator_run(steps, compiled, batches):
    from transformer.model import Transformer
    from transformer.train import teacher_forcing_loss
    tl.manual_seed(0)
    model = Transformer(30, 30, d_model=32, h=2, N=2, d_ff=64, dropout=0.1, pad_id=0)
    opt = Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)

    step = training_step(lambda src, tgt_in, tgt_out: teacher_forcing_loss(model, src, tgt_in, tgt_out, 0.1), opt)
    run = compile(step) if compiled else step
    tl.manual_seed(1)
    losses = [run(*batches[i % len(batches)]).data.copy() for i in range(steps)]
    return losses, [p.data.copy() for p in model.parameters()], run


def gpt_batches(n=3, seed=0):
    r = np.random.default_rng(seed)
    return [(r.integers(0, 40, (3, 12)), r.integers(0, 40, (3, 12))) for _ in range(n)]


def translator_batches(n=3, seed=0):
    r = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        src, tgt = r.integers(4, 30, (4, 7)), r.integers(4, 30, (4, 8))
        src[1:, 5:] = 0            # right padding in some rows
        tgt[2:, 6:] = 0
        out.append((src, tgt[:, :-1], tgt[:, 1:]))
    return out


def assert_same(a, b):
    for x, y in zip(a[0] + a[1], b[0] + b[1]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("path", ["fast", "plain"])
def test_the_gpt_compiled_step_equals_eager_bit_for_bit(path):
    with (fast.plain() if path == "plain" else fast.tricks_off(*RULE_SWITCHES)):
        eager = gpt_run(4, False, gpt_batches())
        compiled = gpt_run(4, True, gpt_batches())
    assert_same(eager, compiled)
    assert compiled[2].captures == 1


@pytest.mark.parametrize("path", ["fast", "plain"])
def test_the_translator_compiled_step_equals_eager_bit_for_bit(path):
    # skipping <pad> rows is decided from the batch's values (a shape that depends on them), so the
    # compiled translator step runs with that trick off; its padding masks are traced from the ids
    with (fast.plain() if path == "plain" else fast.tricks_off("skip_padding", *RULE_SWITCHES)):
        eager = translator_run(4, False, translator_batches())
        compiled = translator_run(4, True, translator_batches())
    assert_same(eager, compiled)
    assert compiled[2].captures == 1 and compiled[2].fallbacks == 0


def test_a_translator_batch_with_an_unknown_token_id_raises_as_eager():
    batches = translator_batches(2)
    bad = (batches[1][0].copy(),) + batches[1][1:]
    bad[0][0, 0] = 99  # outside the vocabulary of 30
    with fast.tricks_off("skip_padding"):
        _, _, run = translator_run(1, True, batches)
        with pytest.raises(ValueError, match="token id 99 outside the vocabulary"):
            run(*bad)
    assert run.fallbacks == 1


def test_rows_counted_inside_the_step_are_refused_with_a_clear_error():
    """A step that finds a batch's real tokens itself (np.flatnonzero on an input: an array whose shape depends
    on the values) is refused, naming the line; a plan cannot follow a shape the values choose."""
    w = Tensor(np.ones((5, 3)), requires_grad=True)

    def step(ids):
        rows = np.flatnonzero(ids)
        return F.embedding(np.take(ids, rows), w).sum()
    src = translator_batches()[0][0] % 5
    with pytest.raises(CompileError, match=r"calls NumPy's flatnonzero, whose shape depends on the values, at "
                                           r".*test_compile_models.py"):
        compile(step)(src)


