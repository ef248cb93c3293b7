"""Our Transformer and PyTorch's, trained side by side: same weights, same batches, same recipe.

    python bench/side_by_side.py --quick                      # toy model, 30 steps: what CI runs
    python bench/side_by_side.py --data train.txt --dev dev.txt --steps 300
    python bench/side_by_side.py --data train.txt --dev dev.txt --steps 300 --dropout 0.1

Both sides start from identical weights (ours copied into `transformer.interop.torch_reference`,
i.e. `torch.nn.Transformer(batch_first=True)` plus embeddings x sqrt(d_model), sinusoidal PE and
the generator) and take one Adam step (beta 0.9, 0.98, eps 1e-9, the Noam schedule) per batch of
the SAME batch list, built by our training pipeline (`transformer.train`). The loss is the
training loss (label-smoothed cross-entropy over the non-pad target tokens), optionally clipped.

- Dropout off: the two loss curves must agree step for step; the script prints the largest
  absolute difference over all steps (float32 rounding only, so ~1e-5 to 1e-3 after hundreds of
  steps). With --float64 on both sides the gap falls by orders of magnitude: it is rounding.
- Dropout on: the masks differ, so the curves can only agree statistically. The script also
  trains ours a second time with another dropout seed; the ours-vs-torch gap over the last
  third of the steps must be of the size of that ours-vs-ours gap (the noise), not larger.

It separates the model and optimizer (which this script checks) from the rest of the training
recipe (batching, vocabulary, tying, schedule: measured with `python -m transformer train`, see
bench/README.md "Real data: per-step parity with the PyTorch recipe").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from train_throughput import set_threads  # noqa: E402  (bench/ sits next to this file)


def build_data(args):
    """Our pipeline's vocab and batches (transformer.train): epoch 0, 1, ... until `steps` batches."""
    from transformer.train import TrainConfig, build_dataset, epoch_batches

    cfg = TrainConfig(
        data=args.data,
        dev=args.dev,
        max_tokens=args.max_tokens,
        min_freq=args.min_freq,
        seed=args.seed,
        batch_by=args.batch_by,
    )
    data = build_dataset(cfg)
    batches, epoch = [], 0
    while len(batches) < args.steps:
        batches += epoch_batches(data, cfg, epoch)
        epoch += 1
    return data, batches[: args.steps]


def build_models(torch, n_src: int, n_tgt: int, args, seed: int, init=None):
    """(ours, theirs) with identical weights; ours keeps torch's final LayerNorms (final_norm).
    `init(ours)`, if given, re-initialises ours before its weights are copied into torch's."""
    import tinygrad_lite as tl
    from transformer.interop import to_torch_state_dict, torch_reference
    from transformer.model import Transformer

    tl.manual_seed(seed)
    ours = Transformer(
        n_src,
        n_tgt,
        d_model=args.d_model,
        h=args.heads,
        N=args.layers,
        d_ff=args.d_ff,
        dropout=args.dropout,
        final_norm=True,
        tie_embeddings=args.tie_embeddings,
        dtype=np.float64 if args.float64 else None,
    )
    if init is not None:
        init(ours)
    theirs = torch_reference(ours)
    if args.float64:
        theirs = theirs.double()
    theirs.load_state_dict(to_torch_state_dict(ours))
    return ours, theirs


def noam(d_model: int, warmup: int):
    return lambda step: d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def ours_engine(model, clip: float = 0.0, label_smoothing: float = 0.0):
    """(train_step(batch, lr) -> loss, eval_loss(batch) -> (mean NLL, tokens)) for our Transformer:
    one Adam (0.9, 0.98, 1e-9) step at the lr given, so a caller can evaluate between steps."""
    from tinygrad_lite import no_grad
    from tinygrad_lite.optim import Adam, clip_grad_norm_
    from transformer.train import batch_loss

    opt = Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def train_step(batch, lr):
        model.train()
        for group in opt.param_groups:
            group["lr"] = lr
        loss, _ = batch_loss(model, batch, label_smoothing)
        opt.zero_grad()
        loss.backward()
        if clip:
            clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss.item()

    def eval_loss(batch):
        model.eval()
        with no_grad():
            loss, n = batch_loss(model, batch, 0.0)
        return loss.item(), n

    return train_step, eval_loss


def torch_engine(torch, model, clip: float = 0.0, label_smoothing: float = 0.0):
    """The same two functions for torch's model (cross_entropy over the non-pad targets, torch's Adam)."""
    from transformer.data import PAD

    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def loss_of(batch, smoothing):
        src, tgt = torch.from_numpy(batch.src), torch.from_numpy(batch.tgt)
        logits = model(src, tgt[:, :-1])
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            tgt[:, 1:].reshape(-1),
            ignore_index=PAD,
            label_smoothing=smoothing,
        )

    def train_step(batch, lr):
        model.train()
        for group in opt.param_groups:
            group["lr"] = lr
        loss = loss_of(batch, label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss.item()

    def eval_loss(batch):
        model.eval()
        with torch.no_grad():
            return loss_of(batch, 0.0).item(), int((batch.tgt[:, 1:] != PAD).sum())

    return train_step, eval_loss


def train(train_step, batches, args) -> list[float]:
    """One step per batch on the Noam schedule (the n-th step at lr = noam(n)); the training losses."""
    schedule = noam(args.d_model, args.warmup)
    return [train_step(batch, schedule(step)) for step, batch in enumerate(batches, start=1)]


def window_means(losses, window: int) -> list[float]:
    return [float(np.mean(losses[i : i + window])) for i in range(0, len(losses), window)]


def needs_torch(threads: int, message: str):
    """torch on `threads` threads (its nested-tensor warning silenced), or exit with `message`."""
    import warnings

    warnings.filterwarnings("ignore", message=".*nested tensors.*")
    torch = set_threads(threads)
    if torch is None:
        raise SystemExit(message)
    return torch


def compare(args) -> dict:
    torch = needs_torch(args.threads, "side_by_side: this benchmark needs torch")
    data, batches = build_data(args)
    n_src, n_tgt = len(data.src_vocab), len(data.tgt_vocab)
    print(
        f"{len(batches)} batches (mean {np.mean([(b.tgt[:, 1:] != 0).sum() for b in batches]):.0f} target "
        f"tokens), vocab zh {n_src} / en {n_tgt}, dropout {args.dropout}, tie {args.tie_embeddings}",
        flush=True,
    )
    ours, theirs = build_models(torch, n_src, n_tgt, args, args.seed)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    a = train(ours_engine(ours, args.clip, args.label_smoothing)[0], batches, args)
    t1 = time.perf_counter()
    b = train(torch_engine(torch, theirs, args.clip, args.label_smoothing)[0], batches, args)
    t2 = time.perf_counter()
    diff = np.abs(np.array(a) - np.array(b))
    row = {
        "steps": len(batches),
        "dropout": args.dropout,
        "tie_embeddings": args.tie_embeddings,
        "float64": args.float64,
        "first_loss_ours": a[0],
        "first_loss_torch": b[0],
        "last_loss_ours": a[-1],
        "last_loss_torch": b[-1],
        "max_abs_diff": float(diff.max()),
        "seconds_ours": t1 - t0,
        "seconds_torch": t2 - t1,
        "losses_ours": a,
        "losses_torch": b,
    }
    w = max(len(batches) // 10, 1)
    print(f"{'steps':>10} {'ours':>8} {'torch':>8}")
    for i, (x, y) in enumerate(zip(window_means(a, w), window_means(b, w))):
        print(f"{i * w + 1:>4}-{min((i + 1) * w, len(a)):<5} {x:8.4f} {y:8.4f}")
    print(
        f"max |loss_ours - loss_torch| over {len(a)} steps: {row['max_abs_diff']:.2e}  "
        f"(time ours {t1 - t0:.1f} s, torch {t2 - t1:.1f} s)"
    )
    if args.dropout > 0:
        row.update(dropout_noise(torch, n_src, n_tgt, batches, args, a, b))
    return row


def dropout_noise(torch, n_src: int, n_tgt: int, batches, args, a, b) -> dict:
    """Ours again from the same weights with other dropout masks: the ours-vs-torch gap over the
    last third of the steps (a: ours, b: torch) against that ours-vs-ours noise."""
    import tinygrad_lite as tl

    again, _ = build_models(torch, n_src, n_tgt, args, args.seed)
    tl.manual_seed(args.seed + 1)  # same weights, other dropout masks
    c = train(ours_engine(again, args.clip, args.label_smoothing)[0], batches, args)
    w = max(len(a) // 3, 1)  # the last third of the run
    tail = slice(len(a) - w, len(a))
    gap = float(np.mean(a[tail]) - np.mean(b[tail]))
    noise = float(np.mean(a[tail]) - np.mean(c[tail]))
    se = float(np.std(np.array(a[tail]) - np.array(b[tail])) / np.sqrt(w))
    print(
        f"dropout on, last {w} steps: mean loss ours {np.mean(a[tail]):.4f}, torch {np.mean(b[tail]):.4f}, "
        f"ours (other dropout seed) {np.mean(c[tail]):.4f}; gap ours-torch {gap:+.4f}, "
        f"ours-ours {noise:+.4f}, paired standard error {se:.4f}"
    )
    return {"tail_gap": gap, "tail_noise": noise, "tail_se": se, "losses_ours_seed2": c}


def add_data_args(p, quick_help: str) -> None:
    """--quick, --data, --dev: the flags both scripts open with."""
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--data", help="training pairs (default: the built-in toy corpus)")
    p.add_argument("--dev")


def add_model_args(p) -> None:
    """The Transformer's size (side_by_side and torch_recipe share these defaults)."""
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--d-ff", type=int, default=512)


def add_run_args(p, json_help: str) -> None:
    """--seed, --threads, --json: the flags both scripts close with."""
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help=json_help)


def use_quick(args, **script_own) -> None:
    """--quick: the built-in toy corpus and a tiny model, plus each script's own step counts."""
    toy = {"data": None, "dev": None, "d_model": 32, "heads": 2, "layers": 1, "d_ff": 64}
    for name, value in {**toy, **script_own}.items():
        setattr(args, name, value)


def append_json(path, row: dict) -> None:
    """One JSON line appended to `path` (nothing without a path)."""
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(p, "toy corpus, tiny model, 30 steps (seconds)")
    p.add_argument("--steps", type=int, default=300)
    add_model_args(p)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--max-tokens", type=int, default=530)
    p.add_argument("--batch-by", default="target", choices=["target", "padded"])
    p.add_argument("--min-freq", type=int, default=2)
    p.add_argument("--tie-embeddings", action="store_true")
    p.add_argument(
        "--float64",
        action="store_true",
        help="both sides in float64: the dropout-off gap shrinks to rounding of float64",
    )
    add_run_args(p, "append the result row (with both loss curves) here")
    args = p.parse_args(argv)
    if args.quick:
        use_quick(args, steps=min(args.steps, 30), max_tokens=300, warmup=20)
    append_json(args.json, compare(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
