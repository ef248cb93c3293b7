"""Training the toy translator: data -> vocab -> batches -> Transformer, with the paper's
recipe (§5.3–5.4): Adam(β1=0.9, β2=0.98, ε=1e-9), the Noam learning-rate schedule,
label smoothing ε_ls = 0.1, dropout P_drop = 0.1.

Runs are reproducible and resumable: batches of epoch e are shuffled with seed
(seed, e); a checkpoint stores weights, optimizer and scheduler state, every rank's RNG
state and the step (transformer.training_state), so `--resume` after a crash or a kill at any
moment continues exactly where the last checkpoint stopped: it ends bit for bit where the
uninterrupted run ends (runs bounded by --max-steps or --epochs; --minutes depends on the clock).

Data parallel (`mpiexec -n K python -m transformer train`, tinygrad_lite.distributed): every
rank builds the same shuffled batches and takes its own, the r-th of every K; one all-reduce
averages the gradients, weighted by target tokens, so a step of K ranks is a step of one process
on the K batches together (transformer.plugins.data_parallel). Rank 0 alone evaluates and writes
files. The lines that do this are marked "data parallel"; with one process each is a no-op.

The loop itself is transformer.loop's, shared with the GPT; Trainer is what it asks of a run (the
batches, when to evaluate and checkpoint, how) and the step it runs, with the production pieces of
transformer.plugins: the --minutes budget, Ctrl-C, data parallel, the divergence guard, averaging.
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor, no_grad
from tinygrad_lite import distributed as dist
from tinygrad_lite.checkpoint import unpack_arrays
from tinygrad_lite.memory import keep_freed_memory
from tinygrad_lite.nn.functional import cross_entropy
from tinygrad_lite.optim import Adam, NoamLR
from tinygrad_lite.threads import use_num_threads

from .data import (
    PAD,
    make_batches,
)
from .evaluation import evaluate_translations
from .loop import Run, forward_backward, make_step, train
from .model import Transformer
from .plugins.averaging import WeightAverage
from .plugins.compiled import compiling
from .plugins.data_parallel import DataParallel
from .plugins.divergence import LossWatch, NonFiniteLoss, TrainingDiverged
from .plugins.interrupt import CtrlC, Interrupted
from .plugins.report import EVENTS_FILE, TrainingReport
from .plugins.time_limit import TimeLimit, cool_down
from .time_budget import TimeBudget
from .train_config import TrainConfig
from .train_data import Dataset, build_dataset, epoch_batches
from .training_state import merge_saved_config, remove_partial_writes, restore_training_state, training_state
from .translator import SENTENCE_END, Translator, TranslatorError


def build_model(cfg: TrainConfig, data: Dataset) -> Transformer:
    model = Transformer(len(data.src_vocab), len(data.tgt_vocab), d_model=cfg.d_model, h=cfg.heads,
                        N=cfg.layers, d_ff=cfg.d_ff, dropout=cfg.dropout,
                        tie_embeddings=cfg.tie_embeddings, final_norm=cfg.final_norm, pad_id=PAD)
    if cfg.embed_init == "xavier":  # N(0, 1/d_model) otherwise (transformer.model)
        from tinygrad_lite.random import rng
        for lut in (model.src_embed.lut, model.tgt_embed.lut):
            bound = math.sqrt(6.0 / sum(lut.weight.shape))
            lut.weight.data[...] = rng().uniform(-bound, bound, lut.weight.shape)
            lut.weight.data[PAD] = 0
    elif cfg.embed_init != "normal":
        raise TranslatorError(f"train: embed_init must be 'normal' or 'xavier', "
                              f"got {cfg.embed_init!r}")
    return model


def scaled_lr(cfg: TrainConfig, ranks: int) -> float:
    """The Noam multiplier for `ranks` data-parallel ranks, whose steps each see `ranks` batches: --lr
    times sqrt(ranks) by default, Adam's square-root scaling rule (Malladi et al., 2022); the measurement
    is in bench/README.md, "Distributed". One rank: --lr itself."""
    factors = {"sqrt": math.sqrt(ranks), "linear": float(ranks), "none": 1.0}
    if cfg.lr_scaling not in factors:
        raise TranslatorError(f"train: lr_scaling must be one of {sorted(factors)}, got {cfg.lr_scaling!r}")
    return cfg.lr * factors[cfg.lr_scaling]


def teacher_forcing_loss(model, src, tgt_in, tgt_out, label_smoothing: float) -> Tensor:
    """Cross-entropy of the model's next-token predictions, mean over tgt_out's real tokens
    (paper §5.4: label smoothing ε_ls), for src (B, S) and tgt_in, tgt_out (B, T) ids. A compiled
    step runs it on the rows that matter only (rule skip_padding); an eager one on every padded row."""
    logits = model(src, tgt_in)                                          # (B, T, V)
    return cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD,
                         label_smoothing=label_smoothing)


def batch_loss(model, batch, label_smoothing: float, loss=teacher_forcing_loss) -> tuple[Tensor, int]:
    """Teacher forcing: the decoder reads <bos> y1..y_{n-1} and predicts y1..y_n <eos>."""
    tgt_in, tgt_out = batch.tgt[:, :-1], batch.tgt[:, 1:]
    return loss(model, batch.src, tgt_in, tgt_out, label_smoothing), int((tgt_out != PAD).sum())


@no_grad()
def evaluate_loss(model, data: Dataset, split: str, max_tokens: int, loss=teacher_forcing_loss) -> float:
    model.eval()
    src, tgt = data.ids[split]
    total, tokens = 0.0, 0
    for batch in make_batches(src, tgt, max(max_tokens, 3000), shuffle=False):
        loss_value, n = batch_loss(model, batch, 0.0, loss)
        total += loss_value.item() * n
        tokens += n
    model.train()
    return total / max(tokens, 1)


class Trainer(Run):
    """Runs a TrainConfig on the loop of transformer.loop. `on_eval(metrics_path)`, if given, is called
    after each evaluation (the CLI draws loss.png with it); an error there never stops training.
    `report` hears of every step and writes every line (TrainingReport; the CLI's draws a progress
    bar). Construction sets the thread count (tinygrad_lite.threads.use_num_threads): cfg.threads,
    else 1 unless the process chose otherwise; the libraries' all-core default collapses when another
    process holds a core. It also keeps freed memory in the process (tinygrad_lite.memory): steps
    reuse it, no page faults."""

    def __init__(self, cfg: TrainConfig, on_eval=None, report: TrainingReport | None = None):
        self.cfg = cfg
        self.report = report or TrainingReport()
        self.threads = use_num_threads(cfg.threads, "train")
        keep_freed_memory()
        self.on_eval = on_eval
        self.budget = TimeBudget(cfg.minutes)  # --minutes over every resumed part (transformer.time_budget)
        self.losses = []          # the training losses since the last evaluation
        self.compiled = self.stepper = None  # the step's compiled part (build_step), train_step's step
        self.steps_per_epoch = 0  # of the current epoch, once it starts
        self.epoch_over, self.batches, self.window = False, (None, []), [0, time.perf_counter()]
        if dist.is_main():  # data parallel: rank 0 alone writes files
            os.makedirs(cfg.out, exist_ok=True)
            remove_partial_writes(cfg.out)  # what a kill in the middle of a write left
        self.checkpoint_path = os.path.join(cfg.out, "checkpoint.safetensors")
        self.best_path = os.path.join(cfg.out, "best.safetensors")
        self.best = [-1.0, -1.0]  # (dev exact match, dev BLEU) of best.safetensors
        self.metrics_path = os.path.join(cfg.out, "metrics.jsonl")
        self.events_path = os.path.join(cfg.out, EVENTS_FILE)  # --explore's (transformer.events)
        tl.manual_seed(dist.rank_seed(cfg.seed))  # data parallel: each rank its own dropout (rank 0: seed)
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        if cfg.resume:
            self._resume()
        else:
            self.data = build_dataset(cfg)
            self.model = build_model(cfg, self.data)
            self._make_optimizer()
            if dist.is_main() and os.path.exists(self.metrics_path):
                os.remove(self.metrics_path)
        self.evaluated_at = self.saved_at = self.step  # nothing to score or save before a first step
        self.budget.closing = 2 if cfg.average > 1 else 1
        self.budget.start()  # (again when the run starts: reading the data is not the run's time)
        dist.broadcast_parameters(self.model.parameters())  # data parallel: every rank starts from rank 0's
        sources = [zh.strip() for zh, _ in self.data.splits["train"]]
        punctuated = np.mean([bool(zh) and zh[-1] in SENTENCE_END for zh in sources])
        self.translator = Translator(self.model, self.data.src_vocab, self.data.tgt_vocab, cfg.lowercase,
                                     self.data.max_src_len, complete_punctuation=bool(punctuated >= 0.95),
                                     min_freq=cfg.min_freq)

    def _make_pieces(self):
        """The production pieces (transformer.plugins) whose state a checkpoint keeps."""
        cfg = self.cfg
        self.averaged = WeightAverage(cfg.average)
        self.nonfinite = NonFiniteLoss("train", lambda: f"step {self.step + 1}",
                                       f"try a lower --lr (now {cfg.lr:g}) or --clip (now {cfg.clip:g})",
                                       self.rerun)
        self.loss_watch = LossWatch(self.nonfinite, lambda text: self.report.write(text))

    def _make_optimizer(self):
        self._make_pieces()
        lr = scaled_lr(self.cfg, dist.world_size())  # data parallel: K batches a step take a larger lr
        self.optimizer = Adam(self.model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        self.scheduler = NoamLR(self.optimizer, d_model=self.cfg.d_model, warmup=self.cfg.warmup)
        self.lr = self.scheduler.get_last_lr()[0]  # what the last step used (cool_down may lower it)
        self.data_parallel = DataParallel(self.model.parameters(), self.budget.elapsed)

    def _resume(self):
        with dist.shared_file(self.checkpoint_path) as path:  # data parallel: rank 0's file, on every rank
            if path is None:
                raise TranslatorError(f"--resume: no checkpoint at {self.checkpoint_path}")
            translator, meta, arrays = Translator.load(path, with_state=True)
        state = unpack_arrays(meta.get("train", {}), arrays, self.checkpoint_path)
        merge_saved_config(self.cfg, state.get("train_config", {}), self.checkpoint_path)
        self.model = translator.model
        self.model.train()
        self.data = build_dataset(self.cfg, (translator.src_vocab, translator.tgt_vocab))
        self._make_optimizer()
        if "optimizer" in meta:
            self.optimizer.load_state_dict(unpack_arrays(meta["optimizer"], arrays, self.checkpoint_path))
        if "scheduler" in meta:
            self.scheduler.load_state_dict(unpack_arrays(meta["scheduler"], arrays, self.checkpoint_path))
            self._continue_schedule_at(scaled_lr(self.cfg, dist.world_size()))
        restore_training_state(self, state)  # data parallel: each rank its own random state
        self.budget.minutes = self.cfg.minutes  # the saved run's total, or the one given again

    def _continue_schedule_at(self, lr: float):
        """The schedule goes on from the saved step with this run's multiplier: another number of
        ranks (data parallel) or a new --lr. The same multiplier changes nothing."""
        if self.scheduler.base_lrs != [lr]:
            self.scheduler.base_lrs = [lr]
            self.scheduler.last_epoch -= 1
            self.scheduler.step()  # the same step again: the lr the next optimizer step uses

    # ------------------------------------------------------------ the step and the loop
    def loss_of(self, batch) -> Tensor:
        """Teacher forcing on a batch (src, tgt): batch_loss's loss (a compiled step skips the <pad> rows)."""
        src, tgt = batch
        return teacher_forcing_loss(self.model, src, tgt[:, :-1], tgt[:, 1:], self.cfg.label_smoothing)

    @staticmethod
    def tokens_of(batch) -> int:
        """The target tokens of a batch (src, tgt) (batch_loss's count)."""
        tgt = batch[1]
        return int((tgt[:, 1:] != PAD).sum())

    def rerun(self, batch) -> None:
        """This step's forward and backward again, eagerly (NonFiniteLoss names the op that made a NaN)."""
        forward_backward(self.loss_of, self.optimizer)(batch)

    def build_step(self):
        """The loop's step (transformer.loop.make_step): Adam on the Noam schedule, the gradient norm
        clipped at --clip; a NaN loss stops it, the ranks' gradients are averaged (data parallel), a loss
        far above its start stops it, and the lr cools down (cool_down) at the ranks' mean time. Unless
        --no-compile the whole update is one plan (transformer.plugins.compiled), which skips <pad> rows
        (rule skip_padding) and serves the batches of every shape up to the longest seen (any_shape)."""
        cfg = self.cfg
        compile = compiling(self, any_shape=True) if cfg.compile else None
        return make_step(forward_backward(self.loss_of, self.optimizer), self.tokens_of, self.model.parameters(),
                         self.optimizer, clip=cfg.clip, set_lr=lambda: self.cool_down(self.data_parallel.mean_clock),
                         scheduler=self.scheduler, plugins=[self.nonfinite, self.data_parallel, self.loss_watch],
                         compile=compile)

    def train_step(self, batch) -> tuple[float, int]:
        """One step outside the loop (benchmarks, tests): (the global batch's loss, its target tokens).
        The step is built once, so a compiled one replays its plans."""
        self.stepper = self.stepper or self.build_step()
        stepped = self.stepper(batch)
        self.step += 1
        self.grad_norm = stepped.grad_norm
        return stepped.loss, stepped.tokens

    def plugins(self) -> list:
        """What a production run adds to the loop: the --minutes budget and Ctrl-C, both acted on by
        every rank after the same step (data parallel)."""
        agree = self.data_parallel.any_rank
        return [TimeLimit(self.budget, agree=agree), CtrlC(agree)]

    def run(self) -> dict | None:
        """Train until --epochs, --max-steps or the --minutes budget ends the run. The budget covers
        everything: training, the evaluations inside it, and the closing one (its time is kept in
        reserve), so the run ends with the best model on dev saved within it. A run resumed after it
        finished trains no further step: it only averages (--average) and reports again. Returns the
        final report (None on ranks other than 0)."""
        try:
            train(self, self.build_step(), self.plugins())
        except TrainingDiverged as e:
            self.report.failed(e)
            raise
        except KeyboardInterrupt as e:  # data parallel: Interrupted is on every rank, a second Ctrl-C on one
            self.save(every_rank=isinstance(e, Interrupted))
            self.report.close()
            print(f"\ninterrupted at step {self.step}: checkpoint saved to {self.checkpoint_path}; "
                  f"continue with --resume")
            raise
        if not dist.is_main():  # data parallel: rank 0 alone averages, tests and reports
            return None
        self.try_average()
        self.report.status("testing the best model on dev")
        report = self.final_report(self.budget.elapsed())
        self.report.close()
        return report

    # ------------------------------------------------------------ what the loop asks (transformer.loop.Run)
    def epoch_batches(self) -> list:
        """The current epoch's batches (shuffled with seed (seed, epoch)), built when it starts."""
        epoch, batches = self.batches
        if epoch != self.epoch:
            K = dist.world_size()
            batches = epoch_batches(self.data, self.cfg, self.epoch)
            if len(batches) < K:
                raise TranslatorError(f"train: an epoch has {len(batches)} batch(es), fewer than the {K} "
                                      f"ranks; lower --max-tokens or start fewer ranks")
            self.batches, self.steps_per_epoch = (self.epoch, batches), len(batches) // K
            self.window = [0, time.perf_counter()]
        return batches

    def next_batch(self):
        K = dist.world_size()
        while self.batch_in_epoch + K > len(self.epoch_batches()):  # (a run resumed with more ranks)
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        return self.epoch_batches()[self.batch_in_epoch + dist.rank()]  # data parallel: rank r's is the r-th

    def counted(self, stepped) -> None:
        """The place in the epoch moves on by K batches (data parallel: one a rank); the step is reported."""
        K, n_batches = dist.world_size(), len(self.epoch_batches())
        self.batch_in_epoch += K
        self.losses.append(stepped.loss)
        self.grad_norm = stepped.grad_norm
        self.window[0] += stepped.tokens
        self.report.step(self, stepped.loss, self.tokens_per_s())
        self.epoch_over = self.batch_in_epoch + K > n_batches
        if self.epoch_over:
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0

    def tokens_per_s(self) -> float:
        """Target tokens a second since the last evaluation or the epoch's start."""
        tokens, t0 = self.window
        return tokens / max(time.perf_counter() - t0, 1e-9)

    def finished(self) -> bool:
        """Whether --max-steps or --epochs is reached."""
        cfg = self.cfg
        return bool(cfg.max_steps and self.step >= cfg.max_steps) or (cfg.epochs is not None
                                                                      and self.epoch >= cfg.epochs)

    def evaluation_due(self) -> bool:
        """Every --eval-every steps (0: at each epoch's end); the loop also evaluates the last step."""
        every = self.cfg.eval_every
        return bool(every and self.step % every == 0) or (self.epoch_over and not every)

    def checkpoint_due(self) -> bool:
        """At each epoch's end and every --save-every steps; the loop also checkpoints each evaluation."""
        every = self.cfg.save_every
        return self.epoch_over or bool(every and self.step % every == 0)

    def out_of_time(self) -> bool:
        """Past the --minutes budget once the closing evaluation (and the averaged one) counts."""
        self.budget.closing = 2 if self.cfg.average > 1 else 1
        return self.budget.out_of_time()

    def budget_spent(self, seconds: float | None = None) -> float | None:
        """The share of its budget the run has used after `seconds` of it (default: now): the
        largest of step/--max-steps, step/(--epochs' steps) and the share of --minutes (less the
        closing evaluation's reserve). None when nothing bounds the run."""
        cfg, shares = self.cfg, []
        if cfg.max_steps:
            shares.append(self.step / cfg.max_steps)
        if cfg.epochs is not None and self.steps_per_epoch:
            shares.append(self.step / (cfg.epochs * self.steps_per_epoch))
        if self.budget.minutes:
            shares.append(self.budget.share_spent(seconds))
        return max(shares) if shares else None

    def cool_down(self, seconds: float) -> None:
        """This step's lr: the Noam schedule's, times the --cooldown factor (transformer.plugins.time_limit)
        after `seconds` of the run."""
        scale = cool_down(self.budget_spent(seconds) if self.cfg.cooldown else None, self.cfg.cooldown)
        for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
            group["lr"] = lr * scale
        self.lr = self.optimizer.param_groups[0]["lr"]

    def watch_loss(self, value: float) -> None:
        """The divergence guard on one loss (transformer.plugins.divergence.LossWatch)."""
        self.loss_watch.watch(value)

    # ------------------------------------------------------------ evaluations and files
    def save(self, every_rank: bool = True):
        """Checkpoint (transformer.training_state). Data parallel: called on every rank at once,
        which send rank 0 their random states, unless `every_rank` is False (rank 0 saves its own)."""
        state = training_state(self, every_rank)
        if dist.is_main():  # data parallel: rank 0 alone writes files
            self.translator.save(self.checkpoint_path, state, self.optimizer, self.scheduler)

    def log(self, record: dict):
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def where(self, n_batches: int) -> str:
        """'step 12 (epoch 1, partial: 12/484 batches)' inside an epoch, 'step 484 (epoch 1)' at
        its end."""
        if self.batch_in_epoch:
            return (f"step {self.step:>5} (epoch {self.epoch + 1}, partial: "
                    f"{self.batch_in_epoch}/{n_batches} batches)")
        return f"step {self.step:>5} (epoch {self.epoch})"

    def best_key(self, scores: dict) -> list:
        """What 'best on dev' means: exact match first on the built-in corpus (it is solvable),
        BLEU first on real data (exact match of real sentences is rare and noisy)."""
        if self.cfg.data is None:
            return [scores["exact_match"], scores["bleu"]]
        return [scores["bleu"], scores["exact_match"]]

    def evaluate(self):
        """Dev loss and BLEU now; keep the best model on dev; report to on_eval."""
        if dist.is_main():  # data parallel: rank 0 evaluates while the others wait
            self._evaluate(self.losses, self.tokens_per_s(), len(self.epoch_batches()))
        self.losses, self.window = [], [0, time.perf_counter()]
        dist.barrier("waiting for rank 0's evaluation")

    def _evaluate(self, losses, tokens_per_s, n_batches: int):
        t0 = self.budget.clock()
        self.report.status("evaluating on dev")
        partial = bool(self.batch_in_epoch)
        epoch = round(self.epoch + self.batch_in_epoch / n_batches, 3) if partial else self.epoch
        record = {"step": self.step, "epoch": epoch, "partial_epoch": partial,
                  "train_loss": float(np.mean(losses)) if losses else None,
                  "lr": self.lr, "tokens_per_s": tokens_per_s}
        dev = self.data.splits.get("dev") or []
        if dev:
            scores = evaluate_translations(self.translator, dev[: self.cfg.dev_bleu_size])
            record.update(dev_loss=evaluate_loss(self.model, self.data, "dev", self.cfg.max_tokens),
                          dev_bleu=scores["bleu"], dev_exact_match=scores["exact_match"])
            key = self.best_key(scores)
        else:
            key = [float(self.step)]  # no dev split: the latest model is the best we can tell
        now = self.budget.clock()
        record.update(seconds=round(self.budget.elapsed(), 1), eval_seconds=round(now - t0, 1),
                      cpu_seconds=round(time.process_time(), 1))
        self.log(record)
        self.averaged.take(self.model)
        if key >= self.best:
            self.best = key
            self.translator.save(self.best_path, {"step": self.step, "epoch": epoch})
        dev_text = (f"dev loss {record['dev_loss']:.3f}  dev BLEU {record['dev_bleu']:.1f}  "
                    f"dev exact {100 * record['dev_exact_match']:.1f}%" if dev else "no dev split")
        self.report.write(f"{self.where(n_batches)}  train loss {record['train_loss'] or 0:.3f}  {dev_text}  "
                          f"{tokens_per_s:.0f} tok/s")
        if self.on_eval is not None:
            try:
                self.on_eval(self.metrics_path)
            except Exception as e:  # noqa: BLE001  (a plot must never stop training)
                self.report.write(f"(on_eval: {e})")
        self.budget.note_evaluation(self.budget.clock() - t0)

    def try_average(self):
        """Checkpoint averaging (transformer.plugins.averaging): the mean of the weights at the last
        --average evaluations becomes best.safetensors if it beats the best single model on dev."""
        dev, mean = self.data.splits.get("dev") or [], self.averaged.mean()
        if mean is None or not dev:
            return
        model = build_model(self.cfg, self.data)
        model.load_state_dict(mean)
        model.eval()
        t = self.translator
        translator = Translator(model, t.src_vocab, t.tgt_vocab, t.lowercase, t.max_train_len,
                                t.complete_punctuation, t.min_freq)
        scores = evaluate_translations(translator, dev[: self.cfg.dev_bleu_size])
        n = len(self.averaged.snapshots)
        record = {"step": self.step, "averaged": n,
                  "dev_loss": evaluate_loss(model, self.data, "dev", self.cfg.max_tokens),
                  "dev_bleu": scores["bleu"], "dev_exact_match": scores["exact_match"]}
        self.log(record)
        kept = self.best_key(scores) > self.best
        if kept:
            self.best = self.best_key(scores)
            translator.save(self.best_path, {"step": self.step, "epoch": self.epoch, "averaged": n})
        verdict = "kept as the best" if kept else "not better; not kept"
        self.report.write(f"average of the last {n} evaluated models: "
                          f"dev loss {record['dev_loss']:.3f}  dev BLEU {scores['bleu']:.1f}  ({verdict})")

    def final_report(self, seconds: float) -> dict:
        """Test and novel scores of the best model on dev (best.safetensors)."""
        translator = Translator.load(self.best_path) if os.path.exists(self.best_path) else self.translator
        report = {"steps": self.step, "epochs": self.epoch, "seconds": seconds,
                  "checkpoint": self.best_path if translator is not self.translator else self.checkpoint_path}
        for split in ("test", "novel"):
            if self.data.splits.get(split):
                s = evaluate_translations(translator, self.data.splits[split])
                report[split] = {k: v for k, v in s.items() if k != "hypotheses"}
        report["example"] = translator.translate("这是一个苹果") if self.cfg.data is None else None
        return report
