"""After a pass, for an exercise that is not an op of a graph, the picture of its idea drawn from the
learner's own function with viz.plots: the warm-up schedule as a curve (§5.3), the causal mask as a heatmap
(§3.2.3), the sinusoidal table as a heatmap (§3.5)."""
from __future__ import annotations

import numpy as np

from viz.plots import plot_attention, plot_loss_curves, plot_positional_encoding

SCHEDULE_STEPS, MASK_SIZE, TABLE_SHAPE = 20000, 8, (64, 32)


def draw_schedule(fn, path):
    """fn(step, 512, 4000) for steps 1 .. 20,000: the paper's base model's learning rate, against the step."""
    rates = [float(fn(step, 512, 4000)) for step in range(1, SCHEDULE_STEPS + 1)]
    return plot_loss_curves({"your noam_factor(step, 512, 4000)": rates}, path, ylabel="learning rate",
                            title="your warm-up schedule (d_model 512, warmup 4000)").path


def draw_mask(fn, path):
    """fn(8) as a heatmap: query position down, key position across, 1 where it may attend."""
    mask = np.asarray(fn(MASK_SIZE), dtype=np.float64).reshape(MASK_SIZE, MASK_SIZE)
    positions = [str(i) for i in range(MASK_SIZE)]
    return plot_attention(mask, positions, out=path, title="your causal_mask(8)").path


def draw_table(fn, path):
    """fn(64, 32) as a heatmap: positions down, dimensions across."""
    return plot_positional_encoding(np.asarray(fn(*TABLE_SHAPE), dtype=np.float64), path,
                                    title="your sinusoidal_table(64, 32)").path
