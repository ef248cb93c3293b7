"""The learner's pieces outside attention, set on the copy task's model and optimizer through their public
seams, never as a parameter of the paper's boxes: dropout (P_drop, §5.4) in every Dropout module, the
sinusoidal table (§3.5) in the positional encoding, the warm-up schedule (§5.3) as NoamLR's factor."""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.nn import Dropout
from tinygrad_lite.optim import NoamLR
from transformer.positional_encoding import PositionalEncoding

P_DROP, D_MODEL, WARMUP, PEAK_SCALE = 0.1, 16, 40, 0.5


def with_dropout(model, dropout, seed: int = 0):
    """Every Dropout module of `model` multiplies its input by the mask your dropout(ones, p, training, rng)
    gives (0 or its scale), so the kept entries' gradients flow through your scaling."""
    rng = np.random.default_rng(seed)

    def forward(self, x):
        mask = np.asarray(dropout(np.ones(x.shape), self.p, self.training, rng), dtype=x.dtype)
        return x * Tensor(mask)
    return _yours(model, Dropout, forward=forward)


def with_table(model, table):
    """The positional encoding of `model` adds your table(length, d_model) in place of the project's."""
    def rows(self, length):
        return np.asarray(table(length, self.d_model), dtype=np.float64)
    return _yours(model, PositionalEncoding, table=rows)


def _yours(model, kind, **methods):
    """`model` with every `kind` module of it made a "Your<kind>" subclass whose `methods` replace kind's."""
    yours = type(f"Your{kind.__name__}", (kind,), methods)
    for module in model.modules():
        if isinstance(module, kind):
            module.__class__ = yours
    return model


def scheduled(optimizer, schedule):
    """NoamLR (d_model 16, warm-up 40 steps) on `optimizer` with your noam_factor as its factor; the
    optimizer's lr, PEAK_SCALE, multiplies it (as the paper's base lr 1 does): ~0.02 at the peak, 0.0125
    at step 100."""
    yours = type("YourNoamLR", (NoamLR,), {"factor": lambda self, step: schedule(step, self.d_model, self.warmup)})
    for group in optimizer.param_groups:
        group["lr"] = PEAK_SCALE
    return yours(optimizer, D_MODEL, WARMUP)
