"""Training the GPT as nanoGPT's train.py does, on a text file (default: the built-in text).

    text      -> a tokenizer trained on all of it (nanoGPT's char vocabulary covers both splits)
              -> the first 90% of the characters train, the last 10% validate (or --val FILE)
    batch     =  batch_size random windows of block_size tokens, targets shifted by one (get_batch)
    lr(it)    =  linear warmup over warmup_iters, then cosine decay to min_lr at lr_decay_iters (get_lr)
    step      =  loss -> backward -> clip the gradient norm at grad_clip -> Muon for the blocks' matrices
                 and AdamW for the rest (--optimizer muon, the default), or AdamW for all (nanoGPT's)
    every eval_interval iterations: the mean loss of eval_iters batches of each split (estimate_loss);
    the best val loss so far is kept as best.safetensors, the run as checkpoint.safetensors.

Runs are reproducible and resumable: batches come from their own seeded NumPy Generator, dropout
from the engine's (tinygrad_lite.random); the checkpoint stores both states with the weights and
the optimizers' moments, so N iterations, then N more with --resume, give the weights of 2N in one go, bit
for bit. Evaluations draw their windows from a third generator, seeded afresh each time: every
evaluation of a run scores the same windows (the curve moves with the model only), and evaluating
changes nothing that training draws.

Data parallel (`mpiexec -n K python -m transformer gpt train`): every rank draws the windows of the
global batch, batch_size x K, from the same stream and trains on its own batch_size of them; one
all-reduce averages the gradients (transformer.plugins.data_parallel), and the learning rates are
x sqrt(K), as the translator's; rank 0 alone evaluates and writes files.

The loop is transformer.loop's, shared with the translator, and so are the pieces a production run adds
(transformer.plugins); the loop reports through a TrainingReport, which the CLI draws.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import fields

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import checkpoint, no_grad
from tinygrad_lite import distributed as dist
from tinygrad_lite.checks import positive_int
from tinygrad_lite.files import atomic_write
from tinygrad_lite.memory import keep_freed_memory
from tinygrad_lite.optim import AdamW, CombinedOptimizer, Muon
from tinygrad_lite.random import get_rng_state, set_rng_state
from tinygrad_lite.threads import use_num_threads

from ..loop import Run, forward_backward, make_step, train
from ..plugins.averaging import WeightAverage
from ..plugins.compiled import compiling, describe_step
from ..plugins.data_parallel import DataParallel
from ..plugins.divergence import LossWatch, NonFiniteLoss, TrainingDiverged
from ..plugins.interrupt import CtrlC, Interrupted
from ..plugins.report import EVENTS_FILE, TrainingReport
from ..plugins.time_limit import TimeLimit
from ..time_budget import TimeBudget
from ..training_state import cut_back, size_of
from .model import FORMAT, GPT, GPTConfig
from .text_data import TextData, fingerprint, get_batch
from .tokenizers import tokenizer_from_dict
from .train_config import PER_INVOCATION, RESUME_FIXED, TRAINING_FORMAT, GPTTrainConfig, GPTTrainingError

BATCHES, EVALUATION = 1, 2                             # the seeded streams besides the engine's


def get_lr(it: int, cfg: GPTTrainConfig, progress: float | None = None) -> float:
    """nanoGPT's schedule: the learning rate of iteration `it` (counted from 0). Without lr_decay_iters
    the cosine ends with the run: at max_iters, or, for a timed run, when the budget is spent
    (`progress`, the share of the --minutes budget used), so a 10-minute run anneals in its 10 minutes."""
    if not cfg.decay_lr:
        return cfg.learning_rate
    if it < cfg.warmup_iters:                                      # 1) linear warmup
        return cfg.learning_rate * (it + 1) / (cfg.warmup_iters + 1)
    if cfg.lr_decay_iters is None and progress is not None:
        decay_ratio = min(max(progress, 0.0), 1.0)                 # 3') the cosine over the time budget
        return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (cfg.learning_rate - cfg.min_lr)
    end = cfg.max_iters if cfg.lr_decay_iters is None else cfg.lr_decay_iters
    if it > end:                                                   # 2) after the decay: min_lr
        return cfg.min_lr
    decay_ratio = (it - cfg.warmup_iters) / max(end - cfg.warmup_iters, 1)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))         # 3) cosine from 1 down to 0
    return cfg.min_lr + coeff * (cfg.learning_rate - cfg.min_lr)


@no_grad()
def evaluate_split(model: GPT, ids, block_size: int, batch_size: int) -> float:
    """The mean next-token loss over a whole split, every token after the first predicted once.

    The split is cut into consecutive windows of block_size tokens (the last one shorter), run
    batch_size at a time: within a window the t-th prediction sees t+1 tokens, as in training and in
    nanoGPT's estimate_loss, so the numbers compare. (A sliding window that gave every token the full
    block_size of context would score lower, and cost block_size times more.) Deterministic: no
    random draw, eval mode (no dropout)."""
    op = "evaluate_split"
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) < 2:
        raise ValueError(f"{op}: ids must be a 1-D int array of at least 2 tokens, got shape {ids.shape} "
                         f"and dtype {ids.dtype}")
    block_size, batch_size = positive_int(op, "block_size", block_size), positive_int(op, "batch_size", batch_size)
    if block_size > model.config.block_size:
        raise ValueError(f"{op}: block_size {block_size} exceeds the model's {model.config.block_size}")
    predicted = len(ids) - 1
    starts = np.arange(0, predicted, block_size)
    full, rest = starts[starts + block_size <= predicted], predicted % block_size
    batches = [[ids[i:i + block_size + 1] for i in full[b:b + batch_size]] for b in range(0, len(full), batch_size)]
    if rest:
        batches.append([ids[predicted - rest:]])
    training = model.training
    model.eval()
    total = 0.0
    try:
        for windows in batches:
            w = np.stack(windows)                                  # (B, T+1)
            total += model.loss(w[:, :-1], w[:, 1:]).item() * w[:, 1:].size
    finally:
        model.train(training)
    return total / predicted


@no_grad()
def estimate_loss(model: GPT, splits: dict, cfg: GPTTrainConfig) -> dict:
    """nanoGPT's estimate_loss: for each split, the mean loss of eval_iters random batches, in eval mode.
    The windows come from a generator seeded with (seed, EVALUATION): the same at every call."""
    model.eval()
    out = {}
    try:
        for name, ids in splits.items():
            rng = np.random.default_rng((cfg.seed, EVALUATION))
            losses = [model.loss(*get_batch(ids, cfg.block_size, cfg.batch_size, rng)).item()
                      for _ in range(cfg.eval_iters)]
            out[name] = float(np.mean(losses))
    finally:
        model.train()
    return out


# ---------------------------------------------------------------- checkpoints
def load_checkpoint(path) -> tuple[GPT, dict]:
    """(model, metadata) from best.safetensors (GPT.save) or checkpoint.safetensors (a run); the
    metadata holds 'tokenizer' (a to_dict()), 'train_config' and 'iter' in both."""
    arrays, meta = checkpoint.load(path)
    run = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else {}
    if meta.get("format") == FORMAT:
        return GPT.load(path)
    if run.get("format") != TRAINING_FORMAT or "config" not in run:
        raise checkpoint.CheckpointError(f"load_checkpoint: {str(path)!r} is not a GPT checkpoint (expected "
                                         f"{FORMAT!r} or {TRAINING_FORMAT!r})")
    weights = {k[len("model/"):]: v for k, v in arrays.items() if k.startswith("model/")}
    model = GPT(GPTConfig.from_dict(run["config"]), dtype=weights["token_embedding.weight"].dtype)
    model.load_state_dict(weights)
    return model, run


def resume_config(out, overrides: dict | None = None) -> GPTTrainConfig:
    """The config to resume the run in `out` with: the checkpoint's, under `overrides` (what the user
    set again). A change to what RESUME_FIXED names is a GPTTrainingError."""
    path = os.path.join(out, "checkpoint.safetensors")
    if not os.path.isfile(path):
        raise GPTTrainingError(f"--resume: no checkpoint at {path}")
    _, meta = checkpoint.load(path)
    saved = (meta.get("metadata") or {}).get("train_config")
    if not isinstance(saved, dict):
        raise GPTTrainingError(f"--resume: {path} is not a GPT training checkpoint")
    overrides = dict(overrides or {})
    clashes = [f"{k}: checkpoint {saved[k]!r}, now {overrides[k]!r}" for k in RESUME_FIXED
               if k in overrides and k in saved and overrides[k] != saved[k]]
    if clashes:
        raise GPTTrainingError(f"--resume: {path} was trained with other settings ({'; '.join(clashes)}); "
                               "use the same flags or a new --out")
    known = {f.name for f in fields(GPTTrainConfig)}
    kept = {k: v for k, v in saved.items() if k in known and k not in PER_INVOCATION}
    return GPTTrainConfig(**{**kept, **overrides, "out": out, "resume": True})


def build_optimizer(model: GPT, cfg: GPTTrainConfig) -> AdamW | CombinedOptimizer:
    """AdamW on nanoGPT's groups: weight decay on the matrices, none on biases and gains. With
    cfg.optimizer "muon", Muon takes the blocks' matrices (attention's and the FFN's weights; the
    same weight decay) and AdamW the embeddings, the tied output layer and the gains."""
    if cfg.optimizer == "adamw":
        return AdamW(model.param_groups(cfg.weight_decay), lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2))
    matrices = model.block_matrices()
    inside = {id(p) for p in matrices}
    rest = [{**g, "params": [p for p in g["params"] if id(p) not in inside]}
            for g in model.param_groups(cfg.weight_decay)]
    return CombinedOptimizer(Muon(matrices, lr=cfg.muon_lr, weight_decay=cfg.weight_decay),
                             AdamW(rest, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2)))


def optimizers_of(optimizer) -> list:
    return optimizer.optimizers if isinstance(optimizer, CombinedOptimizer) else [optimizer]


def set_learning_rates(optimizer, lr: float, cfg: GPTTrainConfig) -> None:
    """The schedule's lr for AdamW's groups; Muon's follow it in proportion (muon_lr at the peak)."""
    for part in optimizers_of(optimizer):
        peak = cfg.muon_lr if isinstance(part, Muon) else cfg.learning_rate
        for group in part.param_groups:
            group["lr"] = lr * peak / cfg.learning_rate


class GPTTrainer(Run):
    """Runs a GPTTrainConfig on the loop of transformer.loop: reads the data, builds the GPT and AdamW
    (or restores all of it from OUT/checkpoint.safetensors when cfg.resume), and run() trains. `report`
    (a TrainingReport) hears of every iteration and writes every line. Construction sets the thread
    count (use_num_threads: cfg.threads, else the process's choice, else 1) and keeps freed memory for
    the next step (tinygrad_lite.memory)."""

    def __init__(self, cfg: GPTTrainConfig, report: TrainingReport | None = None):
        if not isinstance(cfg, GPTTrainConfig):
            raise TypeError(f"GPTTrainer: expected a GPTTrainConfig, got {type(cfg).__name__}")
        self.cfg, self.report = cfg, report or TrainingReport()
        self.threads = use_num_threads(cfg.threads, "gpt train")
        keep_freed_memory()
        self.checkpoint_path = os.path.join(cfg.out, "checkpoint.safetensors")
        self.best_path = os.path.join(cfg.out, "best.safetensors")
        self.metrics_path = os.path.join(cfg.out, "metrics.jsonl")
        self.events_path = os.path.join(cfg.out, EVENTS_FILE)
        self.on_eval, self.grad_norm = None, None  # after each evaluation: on_eval(metrics_path) (--explore)
        self.iter, self.evaluated_at, self.best_val_loss, self.best_iter = 0, None, math.inf, None
        self.budget, self.window, self.compiled = TimeBudget(cfg.minutes), [0.0, 0], None
        self.budget.closing = 2 if cfg.average > 1 else 1  # the averaged model's evaluation too
        self.averaged = WeightAverage(cfg.average)
        self.time_limit = TimeLimit(self.budget, count_next_step=True, agree=DataParallel.any_rank)
        fix = f"try a lower --learning-rate (now {cfg.learning_rate:g}) or --grad-clip (now {cfg.grad_clip:g})"
        self.nonfinite = NonFiniteLoss("gpt train", lambda: f"iter {self.iter}", fix, self.rerun)
        self.loss_watch = LossWatch(self.nonfinite, lambda text: self.report.write(text))
        self.lr_scale = math.sqrt(dist.world_size())  # data parallel: K batches a step, lr x sqrt(K) (as train's)
        if cfg.resume:
            self.restore()
        else:
            self.data = TextData(cfg)
            tl.manual_seed(cfg.seed)                                  # init, then dropout
            self.model = GPT(cfg.model_config(self.data.tokenizer.vocab_size))
            self.optimizer = build_optimizer(self.model, cfg)
            self.batch_rng = np.random.default_rng((cfg.seed, BATCHES))
            os.makedirs(cfg.out, exist_ok=True)
            if dist.is_main() and os.path.exists(self.metrics_path):
                os.remove(self.metrics_path)
            if not dist.is_main():  # data parallel: each rank its own dropout
                tl.manual_seed(dist.rank_seed(cfg.seed))
        dist.broadcast_parameters(self.model.parameters())  # data parallel: every rank starts from rank 0's
        self.data_parallel = DataParallel(self.model.parameters(), self.budget.elapsed)
        self.data_record = self.data.describe()
        self.lr = get_lr(self.iter, cfg) * self.lr_scale

    @property
    def iter(self) -> int:
        """nanoGPT's iter_num: the loop's step count."""
        return self.step

    @iter.setter
    def iter(self, value: int) -> None:
        self.step = value

    def set_lr(self, lr: float) -> None:
        self.lr = lr
        set_learning_rates(self.optimizer, lr, self.cfg)

    def restore(self) -> None:
        """Everything the checkpoint holds: weights, the optimizers' moments, both random streams, the iteration."""
        cfg, path = self.cfg, self.checkpoint_path
        if not os.path.isfile(path):
            raise GPTTrainingError(f"--resume: no checkpoint at {path}")
        run = checkpoint.load(path)[1].get("metadata") or {}
        if run.get("format") != TRAINING_FORMAT:
            raise GPTTrainingError(f"--resume: {path} is not a GPT training checkpoint")
        saved = run["train_config"]
        clashes = [f"{k}: checkpoint {saved.get(k)!r}, now {getattr(cfg, k)!r}" for k in RESUME_FIXED
                   if saved.get(k) != getattr(cfg, k)]
        if clashes:
            raise GPTTrainingError(f"--resume: {path} was trained with other settings ({'; '.join(clashes)}); "
                                   "use the same ones (resume_config reads them) or a new --out")
        self.data = TextData(cfg, tokenizer_from_dict(run["tokenizer"]))
        if fingerprint(self.data.text) != run["data"]["sha256"]:
            raise GPTTrainingError(f"--resume: {self.data.source} is not the text the run in {cfg.out} started on "
                                   "(its SHA-256 differs); resume on the same text, or train into a new --out")
        self.model = GPT(GPTConfig.from_dict(run["config"]))
        self.optimizer = build_optimizer(self.model, cfg)
        settings = [{k: v for k, v in group.items() if k != "params"} for group in self.optimizer.param_groups]
        saved_run = checkpoint.load_training(path, self.model, self.optimizer)  # and the engine's random state
        self.averaged.snapshots = [dict(snapshot) for snapshot in saved_run.get("snapshots", [])]
        ranks = run.get("rank_rngs") or []  # data parallel: each rank its own dropout stream back
        if dist.rank() < len(ranks):
            set_rng_state(ranks[dist.rank()])
        elif not dist.is_main():  # (a rank the saved run did not have starts a new stream)
            tl.manual_seed(dist.rank_seed(cfg.seed, int(run["iter"])))
        for group, own in zip(self.optimizer.param_groups, settings):  # the run's moments, this cfg's settings
            group.update(own)
        self.batch_rng = np.random.default_rng()
        self.batch_rng.bit_generator.state = run["batch_rng"]
        self.iter, self.evaluated_at, self.best_iter = int(run["iter"]), run["evaluated_at"], run["best_iter"]
        self.saved_at = self.iter
        self.best_val_loss = math.inf if run["best_val_loss"] is None else run["best_val_loss"]
        self.budget.restore(run.get("budget") or {"elapsed": run["elapsed"]})
        self.loss_watch.restore(run)
        if dist.is_main():  # data parallel: rank 0 alone writes files
            self.keep_metrics_until(self.iter)
            cut_back(self.events_path, int(run.get("events_bytes", 0)))

    def keep_metrics_until(self, iteration: int) -> None:
        """Drop the metrics logged after the checkpoint (a run killed between logging and saving)."""
        if not os.path.exists(self.metrics_path):
            return
        with open(self.metrics_path, encoding="utf-8") as f:
            records = [(line, json.loads(line)) for line in f if line.strip()]
        lines = [line for line, record in records if record.get("iter", 0) <= iteration and "averaged" not in record]
        with atomic_write(self.metrics_path, durable=False, op="gpt train") as temp:
            temp.write_text("".join(lines), encoding="utf-8")

    # ------------------------------------------------------------ the step and the loop
    def loss_of(self, batch):
        x, y = batch
        return self.model.loss(x, y)

    @staticmethod
    def tokens_of(batch) -> int:
        return batch[1].size

    def rerun(self, batch) -> None:
        """This iteration's forward and backward again, eagerly (NonFiniteLoss names the op that made a NaN)."""
        forward_backward(self.loss_of, self.optimizer)(batch)

    def build_step(self):
        """The loop's step (transformer.loop.make_step): loss, backward, clip at grad_clip, lr(iter), the
        optimizer, all one compiled plan unless cfg.compile is off (transformer.plugins.compiled); a NaN
        loss stops it, and a loss far above its start."""
        cfg = self.cfg
        timed = cfg.minutes is not None and cfg.lr_decay_iters is None

        def set_lr():
            progress = self.budget_spent(self.data_parallel.mean_clock) if timed else None
            self.set_lr(get_lr(self.iter, cfg, progress) * self.lr_scale)
        return make_step(forward_backward(self.loss_of, self.optimizer), self.tokens_of, self.model.parameters(),
                         self.optimizer, clip=cfg.grad_clip, set_lr=set_lr,
                         plugins=[self.nonfinite, self.data_parallel, self.loss_watch],
                         compile=compiling(self) if cfg.compile else None)

    def run(self) -> dict:
        """Train until max_iters or the --minutes budget: the budget covers everything, the evaluations
        inside it and the closing one (its time is kept in reserve). Returns a summary."""
        try:
            train(self, self.build_step(), [self.time_limit, CtrlC(DataParallel.any_rank)])
        except Interrupted:
            self.save()
            raise Interrupted(f"interrupted at iter {self.iter}: checkpoint saved to {self.checkpoint_path}; "
                              "continue with --resume") from None
        except TrainingDiverged as e:
            self.report.failed(e)
            raise
        else:
            averaged = self.try_average() if dist.is_main() else None
        finally:
            self.report.close()
        return {"iters": self.iter, "seconds": self.elapsed(), "best_val_loss": self.best_val_loss,
                "best_iter": self.best_iter, "best": self.best_path, "checkpoint": self.checkpoint_path,
                "metrics": self.metrics_path, "step": describe_step(self.compiled), "averaged": averaged}

    # ------------------------------------------------------------ what the loop asks (transformer.loop.Run)
    def next_batch(self):
        """nanoGPT's get_batch on the run's own stream. Data parallel: every rank draws the K ranks'
        windows, the global batch of one process with batch_size x K, and takes its own share."""
        cfg, K, r = self.cfg, dist.world_size(), dist.rank()
        x, y = get_batch(self.data.ids["train"], cfg.block_size, cfg.batch_size * K, self.batch_rng)
        return x[r * cfg.batch_size:(r + 1) * cfg.batch_size], y[r * cfg.batch_size:(r + 1) * cfg.batch_size]

    def counted(self, stepped) -> None:
        self.window = [self.window[0] + self.time_limit.step_seconds, self.window[1] + 1]
        self.grad_norm = stepped.grad_norm
        self.report.step(self, stepped.loss, self.tokens_per_s())

    def finished(self) -> bool:
        return self.iter >= self.cfg.max_iters

    def evaluation_due(self) -> bool:
        """Every eval_interval iterations, from iter 0 (the untrained model), as nanoGPT."""
        return self.iter % self.cfg.eval_interval == 0

    def tokens_per_s(self) -> float:
        seconds, iters = self.window
        return iters * self.cfg.batch_size * self.cfg.block_size / seconds if seconds else 0.0

    # ------------------------------------------------------------ time (transformer.time_budget)
    def elapsed(self) -> float:
        """Seconds of training so far, over every resumed part of the run."""
        return self.budget.elapsed()

    def budget_spent(self, seconds: float | None = None) -> float:
        """The share of its budget the run has used after `seconds` of it (default: now): iterations
        of max_iters, or time of --minutes (less the closing reserve), whichever is further."""
        return max(self.iter / self.cfg.max_iters, self.budget.share_spent(seconds) or 0.0)

    # ------------------------------------------------------------ evaluations and files
    def evaluate(self) -> None:
        """estimate_loss on both splits now; keep the best val loss; log; report (the loop checkpoints).
        Data parallel: rank 0 evaluates while the others wait."""
        if dist.is_main():
            self._evaluate()
        self.window = [0.0, 0]
        dist.barrier("waiting for rank 0's evaluation")

    def _evaluate(self) -> None:
        t0 = self.budget.clock()
        self.report.status("evaluating")
        losses = estimate_loss(self.model, self.data.ids, self.cfg)
        record = {"iter": self.iter, "train_loss": losses["train"], "val_loss": losses["val"],
                  "lr": self.lr, "tokens_per_s": round(self.tokens_per_s(), 1),
                  "elapsed": round(self.elapsed(), 2)}
        best = losses["val"] < self.best_val_loss
        if best:
            self.best_val_loss, self.best_iter = losses["val"], self.iter
            self.save_best()
        self.averaged.take(self.model)
        self.evaluated_at = self.iter
        record["eval_seconds"] = round(self.budget.clock() - t0, 2)
        self.log(record)
        speed = f"  {record['tokens_per_s']:,.0f} tok/s" if record["tokens_per_s"] else ""
        self.report.write(f"iter {self.iter}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}"
                          f"{'  (best so far)' if best else ''}  lr {record['lr']:.2e}{speed}  "
                          f"{record['elapsed']:.0f} s")
        if self.on_eval is not None:
            try:
                self.on_eval(self.metrics_path)
            except Exception as e:  # noqa: BLE001  (a page or a plot must never stop training)
                self.report.write(f"(on_eval: {e})")
        self.budget.note_evaluation(self.budget.clock() - t0)

    def try_average(self) -> int | None:
        """Checkpoint averaging (transformer.plugins.averaging): the mean of the weights at the last
        --average evaluations, scored as every evaluation is (estimate_loss), becomes best.safetensors
        if its val loss beats the best single model's. Returns how many were averaged (None: none)."""
        mean = self.averaged.mean()
        if mean is None:
            return None
        self.report.status("evaluating the averaged model")
        model = GPT(self.model.config, dtype=mean["token_embedding.weight"].dtype)
        model.load_state_dict(mean)
        losses, n = estimate_loss(model, self.data.ids, self.cfg), len(self.averaged.snapshots)
        self.log({"iter": self.iter, "averaged": n, "val_loss": losses["val"]})
        kept = losses["val"] < self.best_val_loss
        if kept:
            self.best_val_loss = losses["val"]
            model.save(self.best_path, {**self.run_metadata(), "val_loss": losses["val"], "averaged": n})
        self.report.write(f"average of the last {n} evaluated models: train loss {losses['train']:.4f}, val loss "
                          f"{losses['val']:.4f}  ({'kept as the best' if kept else 'not better; not kept'})")
        return n if kept else None

    def run_metadata(self) -> dict:
        """What both checkpoints record besides the weights: enough to sample, evaluate and resume."""
        return {"tokenizer": self.data.tokenizer.to_dict(), "train_config": self.cfg.to_dict(), "iter": self.iter,
                "data": self.data_record}

    def save_best(self) -> None:
        self.model.save(self.best_path, {**self.run_metadata(), "val_loss": self.best_val_loss})

    def save(self) -> None:
        """checkpoint.safetensors: the run as it stands, to resume from (written atomically; data
        parallel: by rank 0, with every rank's random state)."""
        states = dist.gather_json(get_rng_state())
        if not dist.is_main():
            return
        ranks = {"rank_rngs": states} if len(states) > 1 else {}
        best = None if math.isinf(self.best_val_loss) else self.best_val_loss
        checkpoint.save_training(self.checkpoint_path, self.model, self.optimizer, metadata={
            **self.run_metadata(), "format": TRAINING_FORMAT, "config": self.model.config.to_dict(),
            "evaluated_at": self.evaluated_at, "best_val_loss": best, "best_iter": self.best_iter,
            "batch_rng": self.batch_rng.bit_generator.state, "elapsed": self.elapsed(),
            "budget": self.budget.state(), **self.loss_watch.state(), **ranks,
            "events_bytes": size_of(self.events_path),
            "snapshots": self.averaged.snapshots})

    def log(self, record: dict) -> None:
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
