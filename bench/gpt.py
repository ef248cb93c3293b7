"""GPT training throughput: tinygrad-lite's GPT against its PyTorch twin, side by side in one process.

    python bench/gpt.py                                  # nanoGPT's CPU recipe, 1 thread
    python bench/gpt.py --config default                 # gpt train's defaults (Muon + AdamW, 128 x 16)
    python bench/gpt.py --threads 2 --repeats 9 --json out.jsonl
    python bench/gpt.py --profile 20                     # also cProfile 20 of our steps
    python bench/gpt.py --products                       # also time one step's products alone (the BLAS bound)
    python bench/gpt.py --quick --data FILE              # seconds; what the smoke test runs
    python bench/gpt.py --no-compile                     # our step eagerly, op by op (default: compiled)

The recipe is nanoGPT's for a CPU ("I only have a macbook"): 4 layers, 4 heads, n_embd 128,
block_size 64, batch 12, dropout 0, bias False; AdamW at lr 1e-3, betas (0.9, 0.99), weight decay 0.1
on the matrices only; gradients clipped at 1.0. The lr stays constant (nanoGPT warms up for 100
iterations, then decays: that changes no step's cost). The data are character ids of --data (sorted
unique characters), batches drawn as nanoGPT's get_batch does from the first 90% of the file.

Both sides start from the same weights (ours copied into transformer.gpt.interop.torch_gpt) and take
the same batches in the same order, so their losses at equal steps must agree (float32 rounding
only). Timing alternates the two sides repeat by repeat (bench/train_throughput.alternate) and reports
the median per step: iterations/s, tokens/s (batch·block_size per iteration) and ours/torch (> 1: we
are faster). With --products a third side runs just the matrix products of one of our steps (every
Linear's x·Wᵀ, g·W and gᵀ·x, the tied output layer's too) on NumPy's BLAS, and a fourth on oneMKL where the
`mkl` wheel is installed (kernels.mkl; the faster is the bound): torch's step over that time is the most
ours/torch could be if everything else took no time.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_throughput import CLOCKS, alternate, append_json, markdown, median, mkl_bound, start  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
RECIPE = dict(n_layer=4, n_head=4, n_embd=128, block_size=64, dropout=0.0, bias=False)
QUICK = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, dropout=0.0, bias=False)
BATCH, QUICK_BATCH = 12, 4
ADAMW = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
CLIP = 1.0


def char_ids(path) -> tuple[np.ndarray, int]:
    """The file's characters as ids into its sorted unique characters, and the vocabulary size."""
    text = Path(path).read_text(encoding="utf-8")
    chars = sorted(set(text))
    index = {ch: i for i, ch in enumerate(chars)}
    return np.array([index[ch] for ch in text], dtype=np.int64), len(chars)


def batches(data: np.ndarray, count: int, batch: int, block_size: int, seed: int = 0) -> list:
    """`count` (x, y) pairs as nanoGPT's get_batch: random windows of the first 90%, y = x shifted by one."""
    train = data[:int(0.9 * len(data))]
    if len(train) <= block_size + 1:
        raise SystemExit(f"bench/gpt.py: the data's first 90% has {len(train)} characters, fewer than "
                         f"block_size + 2 = {block_size + 2}")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ix = rng.integers(0, len(train) - block_size, size=batch)
        out.append((np.stack([train[i:i + block_size] for i in ix]),
                    np.stack([train[i + 1:i + 1 + block_size] for i in ix])))
    return out


def build(config):
    """(ours, theirs) with the same weights: ours seeded, copied into the PyTorch twin."""
    import tinygrad_lite as tl
    from transformer.gpt import GPT
    from transformer.gpt.interop import to_nanogpt_state_dict, torch_gpt
    tl.manual_seed(0)
    ours = GPT(config)
    theirs = torch_gpt(config)
    theirs.load_state_dict(to_nanogpt_state_dict(ours))
    return ours, theirs


def steppers(ours, theirs, torch, cfg, compiled: bool = True) -> dict:
    """{side: step(batch, lr) -> loss}: loss, backward, clip, then cfg.optimizer as `gpt train` runs it
    (transformer.gpt.training.build_optimizer; the twin's: torch_twin.adamw or muon_and_adamw) at this
    lr; ours compiled as `gpt train` compiles it (its lr read by the optimizer's recorded step at each
    replay) unless compiled=False. A side given as None gets no stepper."""
    from tinygrad_lite.compiler import compile
    from tinygrad_lite.optim import clip_grad_norm_
    from transformer.gpt.torch_twin import adamw, muon_and_adamw
    from transformer.gpt.training import build_optimizer, set_learning_rates

    steps, clip, betas = {}, cfg.grad_clip, (cfg.beta1, cfg.beta2)
    if ours is not None:
        our_opt = build_optimizer(ours, cfg)
        params = list(ours.parameters())

        def update(x, y):
            loss = ours.loss(x, y)
            our_opt.zero_grad()
            loss.backward()
            clip_grad_norm_(params, clip)
            our_opt.step()
            return loss
        run = compile(update) if compiled else update

        def ours_step(batch, lr):
            set_learning_rates(our_opt, lr, cfg)
            return run(*batch).item()
        steps["ours"] = ours_step
    if theirs is not None:
        their_opts = ([adamw(theirs, cfg.learning_rate, betas, cfg.weight_decay)] if cfg.optimizer == "adamw" else
                      muon_and_adamw(theirs, cfg.learning_rate, cfg.muon_lr, betas, cfg.weight_decay))
        peaks = [cfg.learning_rate] if cfg.optimizer == "adamw" else [cfg.muon_lr, cfg.learning_rate]

        def torch_step(batch, lr):
            for opt, peak in zip(their_opts, peaks):
                for group in opt.param_groups:
                    group["lr"] = lr * peak / cfg.learning_rate
            x, y = (torch.from_numpy(a) for a in batch)
            loss = theirs.loss(x, y)
            for opt in their_opts:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(theirs.parameters(), clip)
            for opt in their_opts:
                opt.step()
            return loss.item()
        steps["torch"] = torch_step
    return steps


def recorded(step, lr: float, losses: list):
    """step(batch, lr) at a constant lr as step(batch), each loss appended to `losses`."""
    def run(batch):
        losses.append(step(batch, lr))
    return run


def settings(name: str, vocab: int):
    """(GPTConfig, batch, GPTTrainConfig) of a --config: nanoGPT's CPU recipe, `gpt train`'s defaults,
    or the quick toy."""
    from transformer.gpt import GPTConfig
    from transformer.gpt.training import GPTTrainConfig
    if name == "default":
        cfg = GPTTrainConfig()
        return cfg.model_config(vocab), cfg.batch_size, cfg
    cfg = GPTTrainConfig(optimizer="adamw", learning_rate=ADAMW["lr"], beta2=ADAMW["betas"][1],
                         weight_decay=ADAMW["weight_decay"], grad_clip=CLIP)
    shape, batch = (QUICK, QUICK_BATCH) if name == "quick" else (RECIPE, BATCH)
    return GPTConfig(vocab_size=vocab, **shape), batch, cfg


def step_products(model, rows: int) -> list:
    """The (a, b) operands of the products one training step multiplies, as our Linears lay them out
    (nn.functional.linear): per Linear (out, in), x (rows, in)·Wᵀ, g (rows, out)·W and gᵀ·x; the same for
    the output layer, tied to the token embedding."""
    from tinygrad_lite.nn import Linear
    rng = np.random.default_rng(0)
    weights = [m.weight.data for m in model.modules() if isinstance(m, Linear)] + [model.token_embedding.weight.data]
    pairs = []
    for w in weights:
        n_out, n_in = w.shape
        x, g = (rng.standard_normal((rows, n)).astype(w.dtype) for n in (n_in, n_out))
        pairs += [(x, w.T), (g, w), (g.T, x)]
    return pairs


def products_runner(pairs: list, mkl: bool = False):
    """A step function (it ignores its batch) that runs the products alone: on NumPy's OpenBLAS, or on oneMKL
    (mkl=True; kernels.mkl, which our Linears multiply on where the `mkl` wheel is installed)."""
    from tinygrad_lite.kernels import mkl as onemkl

    def step(_batch):
        for a, b in pairs:
            onemkl.product(a, b) if mkl else a @ b
    return step


def profile(step, data: list, steps: int, top: int = 25) -> str:
    """cProfile of `steps` of our steps: the `top` functions by their own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(steps):
        step(data[i % len(data)])
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def loss_table(losses: dict, every: int) -> tuple[list, float]:
    """Rows (step, ours, torch, |difference|) every `every` steps and at the last, and the largest difference."""
    n = min(len(losses["ours"]), len(losses["torch"]))
    diffs = [abs(losses["ours"][i] - losses["torch"][i]) for i in range(n)]
    picks = sorted(set(range(0, n, max(every, 1))) | {n - 1})
    return [[i + 1, losses["ours"][i], losses["torch"][i], diffs[i]] for i in picks], max(diffs)


def run(args, threads: int, torch) -> dict:
    data, vocab = char_ids(args.data)
    name = "quick" if args.quick else args.config
    config, batch, cfg = settings(name, vocab)
    ours, theirs = build(config)
    losses = {"ours": [], "torch": []}
    steps_at = steppers(ours, theirs, torch, cfg, compiled=not args.no_compile)
    runners = {side: recorded(steps_at[side], cfg.learning_rate, losses[side]) for side in ("ours", "torch")}
    pairs = step_products(ours, batch * config.block_size) if args.products else []
    if pairs:
        runners["products"] = products_runner(pairs)
        if mkl_bound():
            runners["products_mkl"] = products_runner(pairs, mkl=True)
    steps, repeats = (1, 2) if args.quick else (args.steps, args.repeats)
    pool = batches(data, steps * repeats + 2, batch, config.block_size)
    samples = alternate(runners, pool, steps, repeats, clock=CLOCKS[args.clock])
    t_ours, t_torch = median(samples["ours"]), median(samples["torch"])
    rows, worst = loss_table(losses, every=max(len(losses["ours"]) // 6, 1))
    tokens = batch * config.block_size
    bound = {}
    if pairs:
        t_openblas = median(samples["products"])
        t_mkl = median(samples["products_mkl"]) if "products_mkl" in samples else None
        t_products = t_openblas if t_mkl is None else min(t_openblas, t_mkl)
        flops = sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b in pairs)
        bound = {"products_per_step": len(pairs), "gflop_per_step": flops / 1e9, "ms_products": 1e3 * t_products,
                 "gflops_products": flops / t_products / 1e9, "bound_torch_over_products": t_torch / t_products,
                 "bound_blas": "OpenBLAS" if t_products == t_openblas else "oneMKL",
                 "ms_products_openblas": 1e3 * t_openblas, "ms_products_mkl": None if t_mkl is None else 1e3 * t_mkl}
    return {**bound, "config": {"recipe": "nanogpt-cpu"}.get(name, name), "optimizer": cfg.optimizer,
            "ours_compiled": not args.no_compile,
            "threads": threads, "batch": batch,
            **config.to_dict(), "steps_per_sample": steps, "repeats": repeats,
            "it_s_ours": 1 / t_ours, "it_s_torch": 1 / t_torch, "tok_s_ours": tokens / t_ours,
            "tok_s_torch": tokens / t_torch, "ms_per_it_ours": 1e3 * t_ours, "ms_per_it_torch": 1e3 * t_torch,
            "ratio_ours_over_torch": t_torch / t_ours, "losses": rows, "max_loss_difference": worst,
            "initial_loss_ours": losses["ours"][0], "initial_loss_torch": losses["torch"][0]}


def report(row: dict) -> None:
    print()
    print(markdown(["config", "threads", "ours it/s", "torch it/s", "ours tok/s", "torch tok/s", "ours/torch"],
                   [[row["config"], row["threads"], row["it_s_ours"], row["it_s_torch"], row["tok_s_ours"],
                     row["tok_s_torch"], row["ratio_ours_over_torch"]]]))
    print()
    print(markdown(["step", "ours loss", "torch loss", "|difference|"], row["losses"]))
    if "ms_products" in row:
        print()
        print(markdown(["products a step", "GFLOP", "BLAS", "products alone ms", "GFLOP/s", "ours ms", "torch ms",
                        "torch / products (the bound)"],
                       [[row["products_per_step"], row["gflop_per_step"], row["bound_blas"], row["ms_products"],
                         row["gflops_products"],
                         row["ms_per_it_ours"], row["ms_per_it_torch"], row["bound_torch_over_products"]]]))
    if row["max_loss_difference"] > 1e-3 * abs(row["initial_loss_torch"]):
        print(f"WARNING: the losses part by {row['max_loss_difference']:.2e}: the two models do not "
              "compute the same thing")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA), help="a text file (default: the shared tinyshakespeare)")
    parser.add_argument("--config", choices=("recipe", "default"), default="recipe",
                        help="nanoGPT's CPU recipe (AdamW), or `gpt train`'s defaults (Muon + AdamW, 128 x 16)")
    parser.add_argument("--threads", type=int, default=1, help="threads for both sides (default 1)")
    parser.add_argument("--steps", type=int, default=10, help="training steps per timed sample")
    parser.add_argument("--repeats", type=int, default=7, help="timed samples per side (the median is reported)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (steadier on a shared machine; 1 thread)")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="also cProfile this many of our steps and print where the time goes")
    parser.add_argument("--products", action="store_true",
                        help="also time the products of one of our steps alone, side by side (the BLAS bound)")
    parser.add_argument("--json", help="append the result as one JSON line to this file")
    parser.add_argument("--quick", action="store_true", help="a seconds-long run on a toy model (smoke test)")
    parser.add_argument("--no-compile", action="store_true",
                        help="run our step eagerly, op by op, unfused (default: compiled, as `gpt train` runs it)")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.steps < 1 or args.repeats < 1:
        parser.error("--threads, --steps and --repeats must be >= 1")
    if not Path(args.data).is_file():
        parser.error(f"--data: {args.data} is not a file")
    torch, env = start(parser, args.threads)
    from tinygrad_lite.threads import use_num_threads
    use_num_threads(args.threads, op="bench/gpt.py")
    row = {**run(args, args.threads, torch), **env}
    report(row)
    append_json(args.json, row)
    if args.profile:
        data, vocab = char_ids(args.data)
        config, batch, cfg = settings("quick" if args.quick else args.config, vocab)
        ours = build(config)[0]
        step = recorded(steppers(ours, None, torch, cfg, compiled=not args.no_compile)["ours"], cfg.learning_rate, [])
        pool = batches(data, 4, batch, config.block_size)
        step(pool[0])  # compile and warm up outside the profile
        print(profile(step, pool, args.profile))


if __name__ == "__main__":
    main()
