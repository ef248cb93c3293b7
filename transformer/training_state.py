"""What a training checkpoint holds besides the weights, the optimizer and the schedule, so that a
run killed at any moment (SIGKILL, a power cut) and continued with `--resume` ends bit for bit
where the uninterrupted run ends: the same weights, optimizer state, best model and metrics log.

The trainer writes a checkpoint only between steps, once the step's evaluation is done, and
atomically (tinygrad_lite.files): a run resumed from it has nothing of its last step left to redo,
and a run that reached --max-steps or --epochs trains no further step. Besides the step and the
place in the epoch (batches are shuffled with seed (seed, epoch), so the place is enough) it holds

- every rank's random state (dropout): with K ranks each draws its own stream, so rank 0 gathers
  all K (distributed.gather_json) and each rank takes its own back;
- what the next evaluation reports and keeps: the training losses since the last evaluation, the
  best dev score so far, the weights of the last --average evaluations (checkpoint averaging: that
  many copies of the weights), and the first step's loss (the divergence guard's yardstick);
- the time the run has used (transformer.time_budget), so a --minutes run goes on with the rest;
- the sizes of metrics.jsonl and of --explore's events.jsonl, to which a resumed run cuts the files
  back: the records and events written after the checkpoint are written again, once.

Not bit-exact by nature: a run bounded by --minutes (the clock decides where it stops and, with
--cooldown, the lr), and a run resumed with another number of ranks (a rank the saved run did not
have starts a new stream; float sums over other groupings of batches round differently).
"""
from __future__ import annotations

import os
from dataclasses import asdict

from tinygrad_lite import distributed as dist
from tinygrad_lite.random import get_rng_state, manual_seed, set_rng_state

from .translator import TranslatorError

# what a resumed run cannot change: the model's shape and the data its vocab came from
RESUME_FIXED = {"d_model", "heads", "layers", "d_ff", "data", "dev", "test", "lowercase", "min_freq", "seed",
                "max_tokens", "batch_by", "bucket_pool", "tie_embeddings", "final_norm"}
# what each run sets for itself and never takes from the checkpoint
PER_RUN = {"resume", "progress", "out", "threads", "extra", "compile"}
# the files a run writes atomically, whose hidden temporary files a kill can leave behind
ATOMIC_OUTPUTS = ("checkpoint.safetensors", "best.safetensors", "loss.png", "report.json")


def merge_saved_config(cfg, saved: dict, checkpoint_path) -> None:
    """Into `cfg`, the saved run's settings that this run did not set explicitly; an explicit
    setting that changes one of RESUME_FIXED is an error naming both values."""
    explicit = set(cfg.extra.get("explicit", ()))
    clashes = [f"{k}: checkpoint {saved[k]!r}, now {getattr(cfg, k)!r}"
               for k in sorted(explicit & RESUME_FIXED) if k in saved and saved[k] != getattr(cfg, k)]
    if clashes:
        raise TranslatorError(f"--resume: {checkpoint_path} was trained with another config "
                              f"({'; '.join(clashes)}); use the same flags or a new --out")
    for key, value in saved.items():
        if key not in explicit and key not in PER_RUN and hasattr(cfg, key):
            setattr(cfg, key, value)


def training_state(trainer, every_rank: bool = True) -> dict:
    """The trainer's state for its checkpoint, on rank 0 ({} on the others). With `every_rank` it
    is a collective (every rank's random state goes to rank 0): call it on every rank at once;
    without, rank 0 saves its own state alone (the other ranks will draw new streams)."""
    states = dist.gather_json(get_rng_state()) if every_rank else [get_rng_state()]
    if not dist.is_main():
        return {}
    return {"step": trainer.step, "epoch": trainer.epoch, "batch_in_epoch": trainer.batch_in_epoch,
            "best": trainer.best, "rng": states[0], "rank_rngs": states, "losses": list(trainer.losses),
            **trainer.loss_watch.state(), "snapshots": trainer.averaged.snapshots,
            "metrics_bytes": size_of(trainer.metrics_path), "events_bytes": size_of(trainer.events_path),
            "time_budget": trainer.budget.state(),
            "train_config": asdict(trainer.cfg)}


def restore_training_state(trainer, state: dict) -> None:
    """Put back what training_state saved; each rank takes its own random state. A rank the
    saved run did not have (resumed with more ranks) starts a new stream; so do the ranks above 0
    of a checkpoint that holds rank 0's state alone."""
    trainer.step, trainer.epoch = int(state.get("step", 0)), int(state.get("epoch", 0))
    trainer.batch_in_epoch = int(state.get("batch_in_epoch", 0))
    trainer.best = list(state.get("best", trainer.best))
    trainer.losses = [float(x) for x in state.get("losses", [])]
    trainer.loss_watch.restore(state)
    trainer.averaged.snapshots = [dict(snapshot) for snapshot in state.get("snapshots", [])]
    trainer.budget.restore(state.get("time_budget", {}))
    states = state.get("rank_rngs") or ([state["rng"]] if "rng" in state else [])
    if dist.rank() < len(states):
        set_rng_state(states[dist.rank()])
    else:
        manual_seed(dist.rank_seed(trainer.cfg.seed, trainer.step))
    if dist.is_main():
        for path, key in ((trainer.metrics_path, "metrics_bytes"), (trainer.events_path, "events_bytes")):
            if key in state:
                cut_back(path, int(state[key]))


def size_of(path) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def cut_back(path, size: int) -> None:
    """Truncate the file at `path` to its first `size` bytes, if it is longer."""
    if size_of(path) > size:
        with open(path, "r+b") as f:
            f.truncate(size)


def remove_partial_writes(folder) -> list:
    """Delete the hidden temporary files `.NAME.*.tmp*` (tinygrad_lite.files.atomic_write) that a
    kill in the middle of writing one of ATOMIC_OUTPUTS left in `folder`; returns their names."""
    if not os.path.isdir(folder):
        return []
    partial = sorted(name for name in os.listdir(folder) for output in ATOMIC_OUTPUTS
                     if name.startswith(f".{output}.") and ".tmp" in name[len(output) + 2:])
    for name in partial:
        os.remove(os.path.join(folder, name))
    return partial
