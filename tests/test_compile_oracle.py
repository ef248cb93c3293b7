"""Issue 45's oracle: for the translator at TINY, SMALL and BASE-short and the GPT's default, a compiled
training step (the kernels and every trick and rewrite rule as the process has them) against the eager
plain step (fast.plain(): the formulas in NumPy, no trick, no rule), from the same weights, batches and
random stream, dropout on:

- the first loss within 1e-5 and every first gradient within 1e-4, each relative to its own size
  (floored at 1e-3 of the largest gradient, for gradients that are zero in exact arithmetic);
- the weights after 20 optimizer steps (Adam at lr 1e-3) within 1e-4 of each tensor's own size, in
  float64. The tensors whose gradient is zero in exact arithmetic are left out, named: W^K's bias (a
  softmax row does not change when one constant is added to all its scores), where Adam turns the
  round-off into full-size steps. In float32 the same happens wherever a gradient is a sum that nearly
  cancels (~1e-6 of its tensor's largest: two round-offs differ by 5-40%): Adam's first step is
  lr·sign(g), and the eager fast path drifts from the plain one as the compiled step does, at SMALL
  1e-5 (worst tensor) after 1 step, 1e-3 after 5, 2.4e-2 after 20 (LayerNorm biases; median 1.4e-3).

The masks agree wherever both sides draw: with P_drop = 0.1, one differing mask would move a weight by
a full step, far outside these bounds. The translator's batches are padded, so its compiled step runs
rule skip_padding (the position-wise ops on the rows that matter only, dropout drawn there only) against
the plain step's padded forward; run() asserts that the rule ran."""
import numpy as np
import pytest
from training_steps import training_step

import tinygrad_lite as tl
from tinygrad_lite import fast
from tinygrad_lite.compiler import compile
from tinygrad_lite.optim import Adam, AdamW

STEPS = 20
# (vocab, d_model, h, N, d_ff, batch, length): bench/train_throughput.py's CONFIGS; BASE-short's batch made
# smaller, the model as it is (56M parameters)
TRANSLATOR = {"tiny": (200, 64, 2, 1, 128, 32, 10), "small": (1000, 128, 4, 2, 512, 64, 16),
              "base-short": (8000, 512, 8, 6, 2048, 4, 12)}
ZERO_IN_EXACT_ARITHMETIC = ("w_k.bias",)


def translator(config: str, dtype=np.float32):
    from transformer.model import Transformer
    from transformer.train import teacher_forcing_loss
    vocab, d_model, h, N, d_ff, batch, length = TRANSLATOR[config]
    tl.manual_seed(0)
    model = Transformer(vocab, vocab, d_model=d_model, h=h, N=N, d_ff=d_ff, dropout=0.1, pad_id=0, dtype=dtype)
    opt = Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    rng = np.random.default_rng(1)

    def batch_of(i):
        src = rng.integers(4, vocab, (batch, length))
        tgt = rng.integers(4, vocab, (batch, length + 1))
        src[: batch // 2, length - 1 - i % 3:] = 0  # some right padding, as a batch has
        tgt[batch // 2:, length - i % 4:] = 0
        return src, tgt[:, :-1], tgt[:, 1:]
    batches = [batch_of(i) for i in range(4)]

    step = training_step(lambda src, tgt_in, tgt_out: teacher_forcing_loss(model, src, tgt_in, tgt_out, 0.1), opt,
                         model.parameters(), clip=1.0)
    return model, step, batches


def gpt(config: str, dtype=np.float32):
    from transformer.gpt import GPT, GPTConfig
    tl.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=65, dropout=0.1), dtype=dtype)  # nanoGPT's CPU recipe: 4 layers, 4 heads,
    opt = AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    rng = np.random.default_rng(1)
    batches = [(rng.integers(0, 65, (12, 64)), rng.integers(0, 65, (12, 64))) for _ in range(4)]
    return model, training_step(model.loss, opt, model.parameters(), clip=1.0), batches


def run(build, config: str, compiled: bool, steps: int, dtype):
    """(first loss, first gradients by name, weights by name after `steps` steps)."""
    model, step, batches = build(config, dtype)
    names = [name for name, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    stepper = compile(step) if compiled else step
    tl.manual_seed(7)
    loss, first_grads = None, None
    for i in range(steps):
        value = stepper(*batches[i % len(batches)])
        if i == 0:
            loss = float(value.data)
            first_grads = {n: p.grad.copy() for n, p in zip(names, params)}
    if compiled:
        assert stepper.captures == 1 and not stepper.fallbacks, (stepper.captures, stepper.fallbacks)
        ran = [r.fn.__name__ for plan in stepper.plans.values() for r in plan.records if r is not None]
        rules_on = fast.TRICKS.skip_padding and fast.TRICKS.fused_attention  # TINYGRAD_LITE_FAST=0: all off
        assert (rules_on and build is translator) == ("fused_attention_rows_op" in ran), "skip_padding ran iff padded"
    return loss, first_grads, {n: p.data.copy() for n, p in zip(names, params)}


def compiled_and_plain(build, config: str, steps: int = 1, dtype=np.float32):
    compiled = run(build, config, True, steps, dtype)
    with fast.plain():
        plain = run(build, config, False, steps, dtype)
    return compiled, plain


def assert_first_step_agrees(compiled, plain):
    (loss_c, grads_c, _), (loss_p, grads_p, _) = compiled, plain
    assert abs(loss_c - loss_p) <= 1e-5 * abs(loss_p)
    largest = max(np.abs(g).max() for g in grads_p.values())
    assert largest > 0
    for name, g in grads_p.items():
        size = max(np.abs(g).max(), 1e-3 * largest)
        err = np.abs(grads_c[name] - g).max()
        assert err <= 1e-4 * size, f"gradient of {name}: off by {err:.3g}, size {size:.3g}"


def assert_weights_agree(compiled, plain):
    weights_c, weights_p = compiled[2], plain[2]
    kept = [n for n in weights_p if not n.endswith(ZERO_IN_EXACT_ARITHMETIC)]
    assert len(kept) >= 0.9 * len(weights_p)
    for name in kept:
        w = weights_p[name]
        err = np.abs(weights_c[name] - w).max()
        assert err <= 1e-4 * np.abs(w).max(), f"weights of {name} after {STEPS} steps: off by {err:.3g}"


BUILDS = [(translator, "tiny"), (translator, "small"), (translator, "base-short"), (gpt, "default")]


@pytest.mark.parametrize("build,config", BUILDS, ids=[c for _, c in BUILDS])
def test_the_first_compiled_step_agrees_with_the_eager_plain_step_in_float32(build, config):
    assert_first_step_agrees(*compiled_and_plain(build, config))


@pytest.mark.parametrize("build,config", BUILDS, ids=[c for _, c in BUILDS])
def test_the_weights_after_20_compiled_steps_agree_with_the_eager_plain_steps_in_float64(build, config):
    compiled, plain = compiled_and_plain(build, config, STEPS, np.float64)
    assert_first_step_agrees(compiled, plain)
    assert_weights_agree(compiled, plain)
