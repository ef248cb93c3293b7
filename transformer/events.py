"""A training run as events for the live page (`python -m transformer train --explore`, `python -m viz
watch RUN_DIR`): one JSON object a line, appended to OUT/events.jsonl and flushed. A run continued with
--resume first cuts the file back to its checkpoint's step, as metrics.jsonl, so no step appears twice.

    start   the task, the modules whose gradient norms are followed, the probe inputs, the run's sizes
    step    after every step: loss, lr, tokens/s, the gradient norm (before clipping) and its share
            by module (each top-level module, each layer)
    eval    after every evaluation: the metrics record (train and dev loss, dev BLEU; a GPT's val loss)
    probe   after every evaluation: what the model makes of a few held-out inputs now, with its
            attention (layers x heads x target x source): the translator's greedy translations and
            cross-attention (TranslationProbes), a GPT's greedy continuations and self-attention
            (transformer.gpt.probes)
    alert   a gradient-norm spike (over SPIKE times the median of the last WINDOW steps), a NaN/Inf
            gradient (naming the modules), a NaN/Inf loss (naming the op, found by anomaly mode) or
            a diverged loss
    status  what the run does between steps; end: the run is over

Per step this costs one dot product per parameter and one short line; the probes run only where the
run evaluates anyway, in eval mode and with the random state put back, so training takes the same steps."""
from __future__ import annotations

import json
import math
import os
import re
from collections import deque
from statistics import median

import numpy as np

from tinygrad_lite.random import get_rng_state, set_rng_state

from .plugins.report import TrainingReport
from .translator import for_display

SPIKE, WINDOW, WARMUP = 10.0, 100, 10  # a spike: norm > SPIKE x median of the last WINDOW (>= WARMUP) steps
PROBES = 3


def module_groups(model) -> dict:
    """Parameter name prefixes the page follows: each top-level module, and each layer of a stack
    ('encoder.layers.0', a GPT's 'blocks.0'), in the model's order -> their parameters."""
    groups: dict = {}
    for name, p in model.named_parameters():
        parts = name.split(".")
        if len(parts) > 3 and parts[1] == "layers":
            key = ".".join(parts[:3])
        else:
            key = ".".join(parts[:2]) if len(parts) > 2 and parts[1].isdigit() else parts[0]
        groups.setdefault(key, []).append(p)
    return groups


def squared_norms(groups: dict) -> dict:
    """Each group's squared gradient norm (a dot product per parameter)."""
    out = {}
    for name, params in groups.items():
        total = 0.0
        for p in params:
            if p.grad is not None:
                g = p.grad.ravel()
                total += float(np.dot(g, g))
        out[name] = total
    return out


def short(x) -> float | str:
    """A number for the page: 6 significant digits; NaN and Inf as text (JSON has neither)."""
    x = float(x)
    return float(f"{x:.6g}") if math.isfinite(x) else str(x)


class TranslationProbes:
    """The translator's side of the page: its sizes, and a few dev sentences (`inputs`) translated
    greedily with their cross-attention (run)."""
    task = "translation"

    def __init__(self, trainer, count: int = PROBES):
        self.trainer = trainer
        split = trainer.data.splits.get("dev") or trainer.data.splits["train"]
        self.inputs = [zh for zh, _ in split[:count]]

    def config(self) -> dict:
        cfg = self.trainer.cfg
        return {k: getattr(cfg, k) for k in ("d_model", "heads", "layers", "d_ff", "dropout", "label_smoothing",
                                             "clip", "max_steps", "epochs", "minutes", "seed")}

    def run(self) -> list:
        return [probe(self.trainer.translator, zh) for zh in self.inputs]


class TrainingEvents(TrainingReport):
    """A TrainingReport that appends the run's events to OUT/events.jsonl and passes everything on
    to `inner` (the progress bar or the printed lines). Wrap the trainer's on_eval with .on_eval().
    `probes` is the task's side (default the translator's: TranslationProbes)."""

    def __init__(self, trainer, inner: TrainingReport | None = None, probes=None):
        self.trainer, self.inner = trainer, inner or TrainingReport()
        self.probes = probes or TranslationProbes(trainer)
        self.path = trainer.events_path
        self.groups = module_groups(trainer.model)
        self.recent = deque(maxlen=WINDOW)
        self.file = open(self.path, "a" if trainer.cfg.resume else "w", encoding="utf-8")
        self.emit("start", task=self.probes.task, modules=list(self.groups), probes=self.probes.inputs,
                  resumed=trainer.cfg.resume, config=self.probes.config(),
                  parameters=trainer.model.num_parameters())

    def emit(self, event: str, **fields) -> None:
        seconds = self.trainer.budget.elapsed()
        record = {"type": event, "step": self.trainer.step, "t": round(seconds, 3), **fields}
        self.file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.file.flush()

    def step(self, trainer, loss: float, tokens_per_s: float) -> None:
        self.inner.step(trainer, loss, tokens_per_s)
        squares = squared_norms(self.groups)
        total = math.sqrt(sum(squares.values()))
        clipped_from = getattr(trainer, "grad_norm", None)  # (None when the run does not clip)
        scale = clipped_from / total if clipped_from is not None and total > 0 else 1.0  # norms before clipping
        norms = {name: short(scale * math.sqrt(s)) for name, s in squares.items()}
        grad_norm = scale * total
        self.emit("step", loss=short(loss), lr=short(trainer.lr), tokens_per_s=round(tokens_per_s, 1),
                  grad_norm=short(grad_norm), norms=norms)
        self.watch_norm(grad_norm, norms)

    def watch_norm(self, grad_norm: float, norms: dict) -> None:
        """Alert on a NaN/Inf gradient (naming its modules) or a spike over SPIKE x the recent median."""
        if not math.isfinite(grad_norm):
            bad = [name for name, n in norms.items() if isinstance(n, str)]
            self.emit("alert", kind="nonfinite", message=f"the gradient norm is {grad_norm} at step "
                      f"{self.trainer.step}: NaN/Inf gradients in {', '.join(bad) or 'the model'}")
            return
        if len(self.recent) >= WARMUP:
            typical = median(self.recent)
            if grad_norm > SPIKE * typical:
                worst = max(norms, key=lambda name: norms[name])
                self.emit("alert", kind="spike", grad_norm=short(grad_norm), median=short(typical),
                          message=f"gradient-norm spike at step {self.trainer.step}: {grad_norm:.3g}, "
                                  f"{grad_norm / typical:.0f}x the median of the last {len(self.recent)} "
                                  f"steps ({typical:.3g}); largest in {worst}")
        self.recent.append(grad_norm)

    def status(self, text: str) -> None:
        self.inner.status(text)
        self.emit("status", text=text)

    def write(self, text: str) -> None:
        self.inner.write(text)

    def failed(self, error: Exception) -> None:
        """The run stopped: a NaN/Inf loss (its message names the op, from anomaly mode) or a divergence."""
        inner_failed = getattr(self.inner, "failed", None)
        if inner_failed is not None:
            inner_failed(error)
        text = str(error)
        kind = "nonfinite" if re.search(r"became -?(nan|inf)\b", text) else "diverged"
        self.emit("alert", kind=kind, message=text)
        self.emit("end", error=text)

    def close(self) -> None:
        self.inner.close()
        if not self.file.closed:
            self.emit("end")
            self.file.close()

    def on_eval(self, inner=None):
        """The trainer's on_eval: after each evaluation, its metrics and the probes as events, then
        `inner` (e.g. the CLI's loss curve)."""
        def after_evaluation(metrics_path):
            record = last_record(metrics_path)
            if record is not None:
                self.emit("eval", **{k: short(v) if isinstance(v, float) else v for k, v in record.items()
                                     if k != "step"})
            self.emit("probe", probes=self.run_probes())
            if inner is not None:
                inner(metrics_path)
        return after_evaluation

    def run_probes(self) -> list:
        """The probes run by the model as it is now: in eval mode (no dropout) and with the random
        state put back afterwards, so training takes the same steps."""
        model, state = self.trainer.model, get_rng_state()
        was_training = model.training
        model.eval()
        try:
            return self.probes.run()
        finally:
            set_rng_state(state)
            if was_training:
                model.train()


def explore(trainer, probes=None) -> TrainingEvents:
    """--explore: the run's events go to OUT/events.jsonl; the trainer's report and its on_eval (each
    then passes everything on) are wrapped by them."""
    events = TrainingEvents(trainer, trainer.report, probes)
    trainer.report, trainer.on_eval = events, events.on_eval(trainer.on_eval)
    return events


def probe(translator, zh: str) -> dict:
    """One probe sentence: its greedy translation and cross-attention (layers, heads, target, source)."""
    weights, target, source = translator.attention_maps(zh)["cross-attention"]
    return {"zh": zh, "en": for_display(translator.translate(zh)), "source": list(source),
            "target": list(target), "cross": np.round(weights.astype(float), 3).tolist()}


def last_record(metrics_path) -> dict | None:
    """The last line of the metrics log (the evaluation that just ran)."""
    try:
        with open(metrics_path, "rb") as f:
            f.seek(max(0, os.path.getsize(metrics_path) - 8192))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None
