"""Training throughput of the encoder-decoder: tinygrad-lite vs PyTorch on the same CPU.

    python bench/train_throughput.py                          # 1 thread, tiny + small + base-short
    python bench/train_throughput.py --threads 2 --configs small --json out.jsonl
    python bench/train_throughput.py --quick                  # seconds; what the smoke test runs
    python bench/train_throughput.py --no-compile             # our step eagerly, op by op

Both engines build the same model (post-LN, embeddings x sqrt(d_model), sinusoidal PE, the
paper's Figure 1) with identical weights: ours is copied into `transformer.interop.
torch_reference`, which is `torch.nn.Transformer(batch_first=True)` plus embeddings and the
generator. One training step on each side is: forward on a random padded token batch with the
source padding mask and the target padding+causal mask, label-smoothed cross-entropy (eps 0.1)
ignoring <pad>, backward, and an Adam step (beta 0.9, 0.98, eps 1e-9), dropout 0.1 active. Ours is
compiled as the trainers run it (tinygrad_lite.compiler: captured in the warm-up, then replayed, the
rewrite rules fusing attention, the FFN and the residuals); --no-compile runs it eagerly, op by op.

Timing runs both sides in ONE process, alternating them repeat by repeat (so both see the same
machine load), and reports the median time per step. "tok/s" counts target tokens (non-pad
positions of the decoder's output) per second; "ours/torch" > 1 means we are faster.

FLOPs: each step's matrix products (`step_products`: the linear layers, the generator and the
attention blocks, forward plus the two backward products of each, 3x the forward) are counted
and also run alone on OpenBLAS (NumPy's matmul, float32, same shapes) as a third side of the same
alternation: the matmul-only time is the step's BLAS-bound limit. Where oneMKL is installed (the `mkl`
wheel, which our Linears then multiply on, as torch's do: kernels.mkl), the 2-D products run on it too,
a fifth side, and the bound is the faster of the two BLAS. The products counted are those
a step needs: the position-wise layers on the batch's real tokens (our compiled step skips <pad> there:
the compiler's rule skip_padding; with --no-compile our plain boxes, like torch's nn.Transformer, compute
every position: "padded GFLOP").
The tables give each engine's useful GFLOP/s and the share of that limit it reaches (100% =
nothing but the needed products). A fourth side runs the same products as our engine does (a
Linear's on `nn.functional._product`: kernels.panels' micro-kernel where it beats NumPy's BLAS,
which an AVX-512 CPU whose OpenBLAS runs 8-float kernels allows, ~2x there): "ours % of own
products" is the distance to our own limit, and where the panels run, "% of the BLAS bound" can
pass 100%.

Peak memory is measured in a fresh subprocess per side, so neither library's arrays or import
cost leak into the other's number: "peak RSS" is the process's resident high-water mark while
training (Linux VmHWM, reset after the warm-up steps so Numba compilation is not counted) and
"train delta" is that peak minus the RSS just before the first step (libraries imported and
initialised by one step on a throw-away toy model, then the benchmarked model built): what
training adds, i.e. activations, gradients, optimizer state and allocator slack.

--threads N sets the same count everywhere: torch.set_num_threads and tinygrad_lite.set_num_threads
(threadpoolctl BLAS limits + Numba's pool, sized by NUMBA_NUM_THREADS before numba is imported).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAD = 0
# Set on some machines for older OpenBLAS builds; they override the kernels OpenBLAS picks itself
# (on an AVX-512 CPU, its AVX2 "Haswell" kernels instead of "SkylakeX": bench/README, "Eighth pass").
BLAS_ENV_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
ISA_ENV_VAR = "TINYGRAD_LITE_BENCH_ISA"   # set by --isa for the re-executed process
FIRST_REAL_TOKEN = 4  # ids 0..3 are <pad> <unk> <bos> <eos> in the translator's vocabularies


@dataclass(frozen=True)
class BenchConfig:
    """A model size plus a batch shape; `steps` per timed sample and `repeats` samples per side."""
    name: str
    vocab: int
    d_model: int
    h: int
    N: int
    d_ff: int
    batch: int
    tokens: int
    steps: int
    repeats: int


CONFIGS = {
    "tiny": BenchConfig("tiny", 200, 64, 2, 1, 128, 32, 10, steps=10, repeats=9),
    "small": BenchConfig("small", 1000, 128, 4, 2, 512, 64, 16, steps=5, repeats=9),
    "base-short": BenchConfig("base-short", 8000, 512, 8, 6, 2048, 16, 16, steps=2, repeats=5),
}
QUICK = BenchConfig("quick", 50, 16, 2, 1, 32, 4, 6, steps=1, repeats=1)


# --------------------------------------------------------------------------------- environment

def set_threads(threads: int, most: int | None = None):
    """Give every library the same thread count; returns the torch module (or None).

    `most` (default: threads) sizes Numba's pool, fixed when numba is first imported."""
    os.environ.setdefault("NUMBA_NUM_THREADS", str(most or threads))
    import tinygrad_lite as tl
    try:
        import torch
    except ImportError:
        torch = None
    else:
        torch.set_num_threads(threads)
    import numba  # noqa: F401  (loaded now, so set_num_threads also reaches its pool)

    from tinygrad_lite.kernels.backend import load_numba
    load_numba()
    tl.set_num_threads(threads)
    return torch


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def environment(threads: int, torch) -> dict:
    import numba
    from threadpoolctl import threadpool_info

    from tinygrad_lite.kernels import get_backend
    blas = sorted({f"{p['internal_api']} {p.get('version')} ({p.get('architecture')})"
                   for p in threadpool_info() if p["user_api"] == "blas"})
    forced = [f"{name}={os.environ[name]}" for name in BLAS_ENV_VARS if name in os.environ]
    if forced:
        blas.append(f"kernels chosen by {' '.join(forced)}, not by OpenBLAS (to measure a default install, "
                    f"run with `env -u {' -u '.join(BLAS_ENV_VARS)}`)")
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="minutes"),
        "cpu": f"{cpu_model()} ({os.cpu_count()} logical cores)",
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "threads": threads,
        "kernel_backend": get_backend(),
        "versions": (f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, "
                     f"torch {torch.__version__ if torch else 'not installed'}"),
        "blas": "; ".join(blas + ([f"oneMKL {importlib.metadata.version('mkl')} (sequential; kernels.mkl)"]
                                   if mkl_bound() else [])),
        "vector_isa": vector_isa(torch),
    }


def mkl_bound() -> bool:
    """Whether oneMKL runs here (the `mkl` wheel: kernels.mkl): then the BLAS bound is the faster of OpenBLAS
    and oneMKL on the step's products, since our engine's Linears multiply on oneMKL there, as torch's do."""
    from tinygrad_lite.kernels import mkl
    return mkl.available()


def vector_isa(torch) -> str:
    """The widest vectors each engine's code runs: Numba's target, torch's kernels (BLAS: above)."""
    import numba

    from tinygrad_lite.kernels.panels import wide_vectors
    numba_isa = "AVX-512" if wide_vectors() else "AVX2 or narrower"
    torch_isa = torch.backends.cpu.get_cpu_capability() if torch else "-"
    chosen = f" (--isa {os.environ[ISA_ENV_VAR]})" if ISA_ENV_VAR in os.environ else ""
    return f"numba {numba_isa} ({numba.config.CPU_NAME or 'host'}), torch {torch_isa}{chosen}"


def avx2_environment() -> dict:
    """Environment variables that hold every engine to AVX2 on an AVX-512 CPU, read when each library
    loads: OpenBLAS's Haswell kernels, Numba compiling for Haswell without the host's AVX-512
    features (so kernels.panels' wide vectors stay off too), torch's AVX2 kernels and MKL's AVX2."""
    from llvmlite import binding
    host = binding.get_host_cpu_features().flatten().split(",")
    narrowed = [("-" + f[1:]) if f[1:].startswith(("avx512", "amx", "avx10")) else f for f in host if f]
    return {"OPENBLAS_CORETYPE": "Haswell", "NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": ",".join(narrowed),
            "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", ISA_ENV_VAR: "avx2"}


# --------------------------------------------------------------------------------- data

@dataclass
class TokenBatch:
    src: np.ndarray      # (B, S) int64, right-padded with PAD
    tgt_in: np.ndarray   # (B, T) <bos> y1 .. y_{n-1}
    tgt_out: np.ndarray  # (B, T) y1 .. y_n
    target_tokens: int   # non-pad positions of tgt_out


def random_batches(cfg: BenchConfig, count: int, seed: int = 0, tokens: int | None = None,
                   ragged: bool = True) -> list:
    """`count` batches of random ids, each row of random length in [tokens/2, tokens], padded
    (every row full length if not ragged)."""
    rng = np.random.default_rng(seed)
    length = tokens or cfg.tokens
    out = []
    for _ in range(count):
        def padded(width):
            ids = rng.integers(FIRST_REAL_TOKEN, cfg.vocab, size=(cfg.batch, width))
            lengths = rng.integers(max(1, width // 2) if ragged else width, width + 1, size=cfg.batch)
            lengths[0] = width  # one full row, so the batch really is `width` wide
            ids[np.arange(width)[None, :] >= lengths[:, None]] = PAD
            return ids.astype(np.int64)
        src, tgt = padded(length), padded(length + 1)
        out.append(TokenBatch(src, tgt[:, :-1], tgt[:, 1:], int((tgt[:, 1:] != PAD).sum())))
    return out


# --------------------------------------------------------------------------------- the two sides

def build_ours(cfg: BenchConfig, dropout: float = 0.1, seed: int = 0):
    import tinygrad_lite as tl
    from transformer.model import Transformer
    tl.manual_seed(seed)
    return Transformer(cfg.vocab, cfg.vocab, cfg.d_model, cfg.h, cfg.N, cfg.d_ff, dropout=dropout,
                       final_norm=True, pad_id=PAD)


def build_torch(ours_or_config, copy_weights: bool = True):
    """torch_reference for the same config; with our model given, a copy of its weights."""
    from transformer.interop import to_torch_state_dict, torch_reference
    model = torch_reference(ours_or_config)
    if copy_weights and hasattr(ours_or_config, "state_dict"):
        model.load_state_dict(to_torch_state_dict(ours_or_config))
    return model


class OursTrainer:
    """One training step of tinygrad-lite: forward, smoothed CE, backward, Adam; compiled (the trainers'
    default: tinygrad_lite.compiler, its rewrite rules fusing the plain boxes and skipping <pad> rows) unless
    compiled=False, which runs the plain boxes op by op on the padded batch, as the translator's trainer
    does with --no-compile."""

    def __init__(self, model, lr: float = 1e-4, label_smoothing: float = 0.1, compiled: bool = True):
        from tinygrad_lite.compiler import compile
        from tinygrad_lite.optim import Adam
        from transformer.train import teacher_forcing_loss
        self.model, self.label_smoothing = model, label_smoothing
        self.teacher_forcing_loss = teacher_forcing_loss
        self.optimizer = Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        self.update = compile(self.eager_update, any_shape=True) if compiled else self.eager_update

    def loss(self, batch: TokenBatch):
        """The translator's training loss (transformer.train), as `python -m transformer train` computes it."""
        return self.teacher_forcing_loss(self.model, batch.src, batch.tgt_in, batch.tgt_out, self.label_smoothing)

    def eager_update(self, src, tgt_in, tgt_out):
        loss = self.teacher_forcing_loss(self.model, src, tgt_in, tgt_out, self.label_smoothing)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def step(self, batch: TokenBatch) -> float:
        return self.update(batch.src, batch.tgt_in, batch.tgt_out).item()


class TorchTrainer:
    """The same step in PyTorch (torch.optim.Adam with its CPU defaults)."""

    def __init__(self, model, lr: float = 1e-4, label_smoothing: float = 0.1):
        import torch
        self.torch, self.model, self.label_smoothing = torch, model, label_smoothing
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        self._tensors = {}

    def tensors(self, batch: TokenBatch):
        key = id(batch)
        if key not in self._tensors:
            self._tensors[key] = tuple(self.torch.from_numpy(a) for a in (batch.src, batch.tgt_in, batch.tgt_out))
        return self._tensors[key]

    def loss(self, batch: TokenBatch):
        src, tgt_in, tgt_out = self.tensors(batch)
        logits = self.model(src, tgt_in)
        return self.torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD,
            label_smoothing=self.label_smoothing)

    def step(self, batch: TokenBatch) -> float:
        loss = self.loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def check_same_loss(ours, theirs, batch: TokenBatch) -> tuple[float, float]:
    """Both losses on one batch with dropout off: identical weights must give the same number."""
    ours.model.eval()
    theirs.model.eval()
    try:
        import warnings
        warnings.filterwarnings("ignore", message=".*nested tensors.*")
        import tinygrad_lite as tl
        with tl.no_grad():
            a = ours.loss(batch).item()
        with theirs.torch.no_grad():
            b = theirs.loss(batch).item()
    finally:
        ours.model.train()
        theirs.model.train()
    return a, b


# --------------------------------------------------------------------------------- FLOPs

@dataclass(frozen=True)
class Product:
    """`count` matrix products (batch, m, k) @ (batch, k, n) of one training step; batch 1 for
    a linear layer's (rows, in) @ (in, out)."""
    batch: int
    m: int
    k: int
    n: int
    count: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n * self.count


def step_products(cfg: BenchConfig, rows_s: int | None = None, rows_t: int | None = None) -> list:
    """The matrix products of one training step, forward and backward.

    Forward: per encoder layer q, k, v, o (d_model²) and the FFN (d_model·d_ff twice) on rows_s
    source rows; per decoder layer the same on rows_t target rows plus cross-attention (k, v on the
    memory rows); the generator (d_model·vocab); per attention Q·Kᵀ and weights·V on B·h (T_q, T_k)
    blocks. Rows default to every position, B·S and B·T (what torch computes); the real tokens'
    counts give the products a step needs (our engine skips <pad> in the position-wise layers).
    Backward: each product C = A·B gives dA = dC·Bᵀ and dB = Aᵀ·dC, the same FLOPs twice (the
    first layer's input gradient included: the embeddings train), so a step is 3x the forward."""
    rows_s = cfg.batch * cfg.tokens if rows_s is None else rows_s
    rows_t = cfg.batch * cfg.tokens if rows_t is None else rows_t
    d, f, n_layers, bh, dk = cfg.d_model, cfg.d_ff, cfg.N, cfg.batch * cfg.h, cfg.d_model // cfg.h
    s, t = cfg.tokens, cfg.tokens
    forward = [Product(1, rows_s, d, d, 4 * n_layers), Product(1, rows_s, d, f, n_layers),
               Product(1, rows_s, f, d, n_layers),
               Product(1, rows_t, d, d, 6 * n_layers), Product(1, rows_s, d, d, 2 * n_layers),
               Product(1, rows_t, d, f, n_layers), Product(1, rows_t, f, d, n_layers),
               Product(1, rows_t, d, cfg.vocab, 1),
               Product(bh, s, dk, s, n_layers), Product(bh, s, s, dk, n_layers),      # encoder self
               Product(bh, t, dk, t, n_layers), Product(bh, t, t, dk, n_layers),      # decoder self
               Product(bh, t, dk, s, n_layers), Product(bh, t, s, dk, n_layers)]      # cross
    backward = []
    for p in forward:  # dA = dC (m, n) · Bᵀ (n, k); dB = Aᵀ (k, m) · dC (m, n)
        backward += [Product(p.batch, p.m, p.n, p.k, p.count), Product(p.batch, p.k, p.m, p.n, p.count)]
    return forward + backward


def step_flops(cfg: BenchConfig, rows_s: int | None = None, rows_t: int | None = None) -> int:
    return sum(p.flops for p in step_products(cfg, rows_s, rows_t))


def real_rows(batches: list) -> tuple[int, int]:
    """The mean number of real (non-pad) source and decoder-input tokens of a batch."""
    return (round(np.mean([(b.src != PAD).sum() for b in batches])),
            round(np.mean([(b.tgt_in != PAD).sum() for b in batches])))


def blas_step(cfg: BenchConfig, rows_s: int | None = None, rows_t: int | None = None, dtype=np.float32,
              engine: bool = False, mkl: bool = False):
    """A function that runs every product of one step once (OpenBLAS through NumPy's matmul,
    float32, on random operands made here): the matmul-only time of a step, its BLAS-bound limit.
    engine=True: the 2-D (Linear) products on our engine's own product, nn.functional._product.
    mkl=True: the 2-D products on oneMKL (kernels.mkl; the batched ones stay on NumPy's matmul)."""
    from tinygrad_lite.kernels import mkl as onemkl
    from tinygrad_lite.nn.functional import _product
    rng = np.random.default_rng(0)
    operands = []
    for p in step_products(cfg, rows_s, rows_t):
        a = rng.standard_normal((p.batch, p.m, p.k)).astype(dtype)[0 if p.batch == 1 else slice(None)]
        b = rng.standard_normal((p.batch, p.k, p.n)).astype(dtype)[0 if p.batch == 1 else slice(None)]
        operands.append((a, b, np.empty(a.shape[:-1] + b.shape[-1:], dtype), p.count))

    def run(_batch=None):
        for a, b, out, count in operands:
            for _ in range(count):
                if engine and a.ndim == 2:
                    _product(a, b)
                elif mkl and a.ndim == 2:
                    onemkl.product(a, b)
                else:
                    np.matmul(a, b, out=out)
    return run


# --------------------------------------------------------------------------------- timing

def alternate(runners: dict, batches: list, steps: int, repeats: int, warmup: int = 2,
              clock=time.perf_counter) -> dict:
    """{side: [seconds per step, one per repeat]}; sides alternate, their order flipping each repeat.
    clock=time.process_time counts this process's CPU time only: on a machine shared with other
    work, the time slices other processes take do not land on whichever side was running."""
    for fn in runners.values():
        for i in range(warmup):
            fn(batches[i % len(batches)])
    samples = {side: [] for side in runners}
    order = list(runners)
    cursor = 0
    for r in range(repeats):
        for side in (order if r % 2 == 0 else order[::-1]):
            fn = runners[side]
            start = clock()
            for i in range(steps):
                fn(batches[(cursor + i) % len(batches)])
            samples[side].append((clock() - start) / steps)
        cursor += steps
    return samples


def start(parser, threads: int, most: int | None = None) -> tuple:
    """The opening of every bench script: equal thread counts everywhere (set_threads), then the
    environment printed as a header. Returns (torch, environment dict); torch is required."""
    torch = set_threads(threads, most)
    if torch is None:
        parser.error("this benchmark needs torch")
    env = environment(threads, torch)
    print("\n".join(f"- {k}: {v}" for k, v in env.items()), flush=True)
    return torch, env


def pick_configs(parser, spec: str) -> list:
    """BenchConfigs named in a comma list ("tiny,small"), or a parser error naming the unknown."""
    names = [c.strip() for c in spec.split(",") if c.strip()]
    unknown = sorted(set(names) - set(CONFIGS))
    if unknown:
        parser.error(f"--configs: unknown {unknown}; choose from {sorted(CONFIGS)}")
    return [CONFIGS[n] for n in names]


def append_json(path: str | None, row: dict) -> None:
    """One JSON line per result row, appended, when --json was given."""
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def median(values) -> float:
    return float(np.median(values))


def markdown(header, rows) -> str:
    def cell(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
        return str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------------- memory

def status_kb(field: str) -> int | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def reset_peak() -> bool:
    """Reset the kernel's resident high-water mark (Linux >= 4.0); False if not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory_child(side: str, cfg: BenchConfig, threads: int, steps: int, ragged: bool = True,
                 compiled: bool = True) -> dict:
    """Run in a fresh process: build one side, train `steps` steps, report resident memory (MB)."""
    import resource
    torch = set_threads(threads) if side == "torch" else None
    if side == "ours":
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
        import tinygrad_lite as tl
        from tinygrad_lite.kernels.backend import load_numba
        load_numba()
        tl.set_num_threads(threads)

    def trainer_for(c: BenchConfig):
        if side == "ours":
            return OursTrainer(build_ours(c), compiled=compiled)
        from transformer.model import TransformerConfig
        torch.manual_seed(0)
        return TorchTrainer(build_torch(TransformerConfig(c.vocab, c.vocab, c.d_model, c.h, c.N, c.d_ff, 0.1,
                                                          final_norm=True, pad_id=PAD)))
    trainer_for(QUICK).step(random_batches(QUICK, 1)[0])  # libraries initialised, kernels loaded
    batches = random_batches(cfg, 2, ragged=ragged)
    trainer = trainer_for(cfg)
    before_kb = status_kb("VmRSS")
    for batch in batches:  # warm-up: Numba loads/compiles its kernels, optimizer state appears, plans are captured
        trainer.step(batch)
    reset = reset_peak()
    for i in range(steps):
        trainer.step(batches[i % 2])
    peak_kb = status_kb("VmHWM") if reset else None
    if peak_kb is None:
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"side": side, "peak_rss_mb": peak_kb / 1024, "before_mb": before_kb / 1024 if before_kb else None,
            "train_delta_mb": (peak_kb - before_kb) / 1024 if before_kb else None,
            "method": "VmHWM after warm-up" if reset else "ru_maxrss (whole process)"}


def measure_memory(cfg: BenchConfig, threads: int, steps: int = 3, ragged: bool = True, compiled: bool = True) -> dict:
    """{side: memory_child(...)} with each side in its own fresh interpreter."""
    out = {}
    for side in ("ours", "torch"):
        done = subprocess.run([sys.executable, __file__, "--memory-child", side, "--threads", str(threads),
                               "--config-json", json.dumps(asdict(cfg)), "--memory-steps", str(steps)]
                              + ([] if ragged else ["--full-rows"]) + ([] if compiled else ["--no-compile"]),
                              capture_output=True, text=True, cwd=ROOT, check=False)
        if done.returncode:
            raise RuntimeError(f"memory child for {side} failed:\n{done.stderr[-2000:]}")
        out[side] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


# --------------------------------------------------------------------------------- main

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def bench_config(cfg: BenchConfig, threads: int, torch, with_memory: bool = True, clock: str = "wall",
                 compiled: bool = True) -> dict:
    ours_model = build_ours(cfg)
    torch.manual_seed(0)
    theirs_model = build_torch(ours_model)
    ours, theirs = OursTrainer(ours_model, compiled=compiled), TorchTrainer(theirs_model)
    batches = random_batches(cfg, 4)
    loss_ours, loss_torch = check_same_loss(ours, theirs, batches[0])
    rows = real_rows(batches)
    sides = {"ours": ours.step, "torch": theirs.step, "blas": blas_step(cfg, *rows),
             "products": blas_step(cfg, *rows, engine=True)}
    if mkl_bound():
        sides["mkl"] = blas_step(cfg, *rows, mkl=True)
    samples = alternate(sides, batches, cfg.steps, cfg.repeats, clock=CLOCKS[clock])
    tokens_per_step = float(np.mean([b.target_tokens for b in batches]))
    t_ours, t_torch, t_openblas = median(samples["ours"]), median(samples["torch"]), median(samples["blas"])
    t_mkl = median(samples["mkl"]) if "mkl" in samples else None
    t_blas = t_openblas if t_mkl is None else min(t_openblas, t_mkl)
    t_products = median(samples["products"])
    flops = step_flops(cfg, *rows)
    row = {
        "config": cfg.name, "threads": threads,
        "model": f"d_model {cfg.d_model}, h {cfg.h}, N {cfg.N}+{cfg.N}, d_ff {cfg.d_ff}, vocab {cfg.vocab}",
        "batch": f"{cfg.batch} x {cfg.tokens}", "target_tokens_per_step": tokens_per_step,
        "ms_per_step_ours": 1e3 * t_ours, "ms_per_step_torch": 1e3 * t_torch,
        "tok_s_ours": tokens_per_step / t_ours, "tok_s_torch": tokens_per_step / t_torch,
        "ratio_ours_over_torch": t_torch / t_ours,
        "spread_ours_pct": 100 * (max(samples["ours"]) - min(samples["ours"])) / t_ours,
        "spread_torch_pct": 100 * (max(samples["torch"]) - min(samples["torch"])) / t_torch,
        "initial_loss_ours": loss_ours, "initial_loss_torch": loss_torch,
        "matmul_gflop_per_step": flops / 1e9, "padded_gflop_per_step": step_flops(cfg) / 1e9,
        "ms_per_step_blas": 1e3 * t_blas, "ms_per_step_openblas": 1e3 * t_openblas,
        "ms_per_step_mkl": None if t_mkl is None else 1e3 * t_mkl,
        "bound_blas": "OpenBLAS" if t_blas == t_openblas else "oneMKL",
        "gflop_s_ours": flops / t_ours / 1e9, "gflop_s_torch": flops / t_torch / 1e9,
        "gflop_s_blas": flops / t_blas / 1e9,
        "blas_bound_share_ours": t_blas / t_ours, "blas_bound_share_torch": t_blas / t_torch,
        "ms_per_step_products": 1e3 * t_products, "gflop_s_products": flops / t_products / 1e9,
        "products_share_ours": t_products / t_ours,
        "steps_per_sample": cfg.steps, "repeats": cfg.repeats, "clock": clock, "ours_compiled": compiled,
    }
    if with_memory:
        mem = measure_memory(cfg, threads, compiled=compiled)
        for side in ("ours", "torch"):
            row[f"peak_rss_mb_{side}"] = mem[side]["peak_rss_mb"]
            row[f"train_delta_mb_{side}"] = mem[side]["train_delta_mb"]
        row["memory_method"] = mem["ours"]["method"]
    return row


def print_table(rows: list) -> None:
    header = ["config", "threads", "batch", "ours tok/s", "torch tok/s", "ours/torch", "ours ms/step",
              "torch ms/step", "peak RSS ours MB", "peak RSS torch MB", "train delta ours MB",
              "train delta torch MB"]
    body = [[r["config"], r["threads"], r["batch"], r["tok_s_ours"], r["tok_s_torch"], r["ratio_ours_over_torch"],
             r["ms_per_step_ours"], r["ms_per_step_torch"], r.get("peak_rss_mb_ours", "-"),
             r.get("peak_rss_mb_torch", "-"), r.get("train_delta_mb_ours", "-"),
             r.get("train_delta_mb_torch", "-")] for r in rows]
    print(markdown(header, body))
    print()
    header = ["config", "threads", "matmul GFLOP/step", "padded GFLOP/step", "BLAS-bound ms/step", "bound's BLAS",
              "BLAS GFLOP/s",
              "ours GFLOP/s", "torch GFLOP/s", "ours % of bound", "torch % of bound", "own products ms/step",
              "own products GFLOP/s", "ours % of own products"]
    body = [[r["config"], r["threads"], r["matmul_gflop_per_step"], r["padded_gflop_per_step"],
             r["ms_per_step_blas"], r["bound_blas"], r["gflop_s_blas"],
             r["gflop_s_ours"], r["gflop_s_torch"], 100 * r["blas_bound_share_ours"],
             100 * r["blas_bound_share_torch"], r["ms_per_step_products"], r["gflop_s_products"],
             100 * r["products_share_ours"]] for r in rows]
    print(markdown(header, body))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1", help="thread count, or a comma list (e.g. 1,2)")
    parser.add_argument("--configs", default="tiny,small,base-short", help=f"comma list of {sorted(CONFIGS)}")
    parser.add_argument("--repeats", type=int, help="override each config's number of timed samples")
    parser.add_argument("--json", help="append one JSON line per (config, threads) to this file")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    parser.add_argument("--quick", action="store_true", help="a seconds-long run on a toy config (smoke test)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (steadier on a shared machine; 1 thread)")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native",
                        help="avx2: rerun with every engine held to AVX2 (OpenBLAS, Numba, torch), to measure an "
                             "AVX-512 CPU with its AVX-512 kernels switched off")
    parser.add_argument("--no-compile", action="store_true",
                        help="run our step eagerly, op by op, the paper's boxes unfused (default: compiled, as the "
                             "trainers run it)")
    parser.add_argument("--memory-child", choices=["ours", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--config-json", help=argparse.SUPPRESS)
    parser.add_argument("--memory-steps", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--full-rows", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.isa == "avx2" and ISA_ENV_VAR not in os.environ:  # the libraries read these when they load
        os.execve(sys.executable, [sys.executable, __file__, *(sys.argv[1:] if argv is None else argv)],
                  {**os.environ, **avx2_environment()})

    if args.memory_child:
        cfg = BenchConfig(**json.loads(args.config_json))
        print(json.dumps(memory_child(args.memory_child, cfg, int(args.threads), args.memory_steps,
                                      ragged=not args.full_rows, compiled=not args.no_compile)))
        return

    thread_counts = [int(t) for t in str(args.threads).split(",") if t.strip()]
    configs = [QUICK] if args.quick else pick_configs(parser, args.configs)
    if args.repeats:
        configs = [BenchConfig(**{**asdict(c), "repeats": args.repeats}) for c in configs]
    if not thread_counts or min(thread_counts) < 1:
        parser.error("--threads must be >= 1")

    rows = []
    for threads in thread_counts:
        torch, env = start(parser, threads, max(thread_counts))
        for cfg in configs:
            row = {**bench_config(cfg, threads, torch, with_memory=not args.no_memory, clock=args.clock,
                                  compiled=not args.no_compile), **env}
            rows.append(row)
            print(f"  {cfg.name}: ours {row['tok_s_ours']:.0f} tok/s, torch {row['tok_s_torch']:.0f} tok/s, "
                  f"ratio {row['ratio_ours_over_torch']:.2f} (initial loss {row['initial_loss_ours']:.4f} vs "
                  f"{row['initial_loss_torch']:.4f}); {row['gflop_s_ours']:.1f} vs {row['gflop_s_torch']:.1f} "
                  f"GFLOP/s, {100 * row['blas_bound_share_ours']:.0f}% vs {100 * row['blas_bound_share_torch']:.0f}% "
                  f"of the BLAS bound ({row['gflop_s_blas']:.1f} GFLOP/s, {row['bound_blas']}"
                  + (f"; OpenBLAS {row['ms_per_step_openblas']:.2f} ms, oneMKL {row['ms_per_step_mkl']:.2f} ms"
                     if row["ms_per_step_mkl"] is not None else "") + "); ours "
                  f"{100 * row['products_share_ours']:.0f}% of its own products' bound "
                  f"({row['gflop_s_products']:.1f} GFLOP/s)", flush=True)
            append_json(args.json, row)
    print()
    print_table(rows)
    bad = [r["config"] for r in rows if not math.isclose(r["initial_loss_ours"], r["initial_loss_torch"],
                                                         rel_tol=1e-3, abs_tol=1e-4)]
    if bad:
        print(f"WARNING: initial losses differ for {bad}: the two models do not compute the same thing")


if __name__ == "__main__":
    main()
