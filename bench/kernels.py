"""Benchmark the Numba kernels against their NumPy twins and PyTorch CPU.

    python bench/kernels.py                 # 1 thread, float32, both configs, Markdown tables
    python bench/kernels.py --threads 2 --dtype float64 --repeats 50

Shapes come from two Transformer configurations: the toy translator's SMALL one (d_model 128,
h 4, d_ff 512, batch 64 x 16 tokens) and the paper's base model (d_model 512, h 8, d_ff 2048,
here 32 x 32 tokens). Every row is a median over repeats of per-call wall time in
microseconds; "x twin" and "x torch" are how many times faster the Numba path is (> 1 = faster).

--threads N fixes the same thread count for everyone: NUMBA_NUM_THREADS and
numba.set_num_threads, torch.set_num_threads, and threadpoolctl's limit for BLAS. The script
reports which BLAS ran and warns (without changing anything) when OPENBLAS_CORETYPE or
OPENBLAS_L2_SIZE are set, since they change OpenBLAS's kernels. It also measures Numba's
first-call compile time and the cached load time, each in a fresh subprocess.
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from train_throughput import BLAS_ENV_VARS, cpu_model  # shared with the other bench scripts

from tinygrad_lite import Tensor, dispatch, kernels  # (this imports no numba yet: threads are set first)
from tinygrad_lite.kernels import layernorm as ln
from tinygrad_lite.kernels import softmax as sm

FORMULA = dispatch.FORMULAS  # the ops' NumPy formulas (in their op files), the "numpy" rows

CONFIGS = {
    # name: (d_model, h, d_ff, batch, tokens per sequence, vocabulary assumed for log_softmax)
    "small": (128, 4, 512, 64, 16, 1000),
    "base": (512, 8, 2048, 32, 32, 8000),
}


# --------------------------------------------------------------------------------- timing

def median_us(fn, repeats, min_sample_s=2e-4):
    """Median per-call time in microseconds; short calls are looped to fill each sample."""
    fn()
    fn()
    start = time.perf_counter()
    fn()
    single = time.perf_counter() - start
    inner = max(1, math.ceil(min_sample_s / max(single, 1e-9)))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return 1e6 * float(np.median(samples))


def ratio(slow, fast):
    return slow / fast if fast else float("nan")


# --------------------------------------------------------------------------------- environment

def set_threads(threads, dtype):
    """Fix the thread count of Numba, BLAS and torch; returns (numba, torch or None, limiter).

    The BLAS limit comes last: importing numba pulls in SciPy's own OpenBLAS, loaded lazily.
    """
    os.environ["NUMBA_NUM_THREADS"] = str(threads)
    import numba

    import tinygrad_lite
    tinygrad_lite.set_num_threads(threads)  # the engine's count (else its first kernel sets its default, 1)
    try:
        import torch
    except ImportError:
        torch = None
    else:
        torch.set_num_threads(threads)
    kernels.set_backend("numba")
    sm.softmax_forward_numba(np.ones((2, 2), dtype))  # starts Numba's threading layer
    from threadpoolctl import threadpool_limits

    return numba, torch, threadpool_limits(limits=threads, user_api="blas")


def threading_layer(numba):
    try:
        return numba.threading_layer()
    except ValueError:  # not chosen until the first parallel kernel runs
        return "not initialised"


def describe_environment(numba, torch, threads, dtype):
    import llvmlite
    from threadpoolctl import threadpool_info

    torch_threads = torch.get_num_threads() if torch else "-"
    torch_version = torch.__version__ if torch else "not installed"
    lines = [
        f"date: {datetime.datetime.now().astimezone().isoformat(timespec='minutes')}",
        f"cpu: {cpu_model()} ({os.cpu_count()} logical cores)",
        (f"threads: {threads} (numba {numba.get_num_threads()}, torch {torch_threads}, "
         f"blas limit {threads}); numba threading layer: {threading_layer(numba)}"),
        f"dtype: {np.dtype(dtype).name}",
        (f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, "
         f"llvmlite {llvmlite.__version__}, torch {torch_version}"),
    ]
    for pool in threadpool_info():
        if pool["user_api"] == "blas":
            lines.append(f"blas: {pool['internal_api']} {pool.get('version')} "
                         f"({pool.get('architecture')}, {pool['num_threads']} threads, "
                         f"{Path(pool['filepath']).name})")
    for name in BLAS_ENV_VARS:
        if name in os.environ:
            lines.append(f"WARNING: {name}={os.environ[name]} is set; it changes which OpenBLAS "
                         f"kernels run, so these numbers may not match a default install")
    return lines


# --------------------------------------------------------------------------------- compile time

_COMPILE_PROBE = r"""
import json, sys, time
import numpy as np
t = time.perf_counter()
import numba
timings = {"import numba": time.perf_counter() - t}
from tinygrad_lite.kernels import layernorm as ln, softmax as sm
x = np.ones((4, 8), np.float32)
calls = [
    ("first call (Numba runtime init + softmax_forward)", lambda: sm.softmax_forward_numba(x)),
    ("softmax_backward", lambda: sm.softmax_backward_numba(x, x)),
    ("log_softmax_forward", lambda: sm.log_softmax_forward_numba(x)),
    ("log_softmax_backward", lambda: sm.log_softmax_backward_numba(x, x)),
    ("layernorm_forward", lambda: ln.layernorm_forward_numba(x, None, None)),
    ("layernorm_backward", lambda: ln.layernorm_backward_numba(x, x, None, x[:, :1], x[:, :1])),
]
for name, call in calls:
    t = time.perf_counter()
    call()
    timings[name] = time.perf_counter() - t
print(json.dumps(timings))
"""


def compile_times():
    """{phase: {step: seconds}} for a cold and a warm Numba cache, each in a fresh process."""
    root = Path(__file__).resolve().parent.parent
    results = {}
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, PYTHONPATH=str(root))
        for phase in ("cold cache (compile)", "warm cache (load)"):
            done = subprocess.run([sys.executable, "-c", _COMPILE_PROBE], env=env, cwd=root,
                                  capture_output=True, text=True, check=True)
            results[phase] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


# --------------------------------------------------------------------------------- cases

def last_axis_cases(config, dtype, rng):
    """(kernel, shape, {impl: (forward, backward)}) for softmax, log_softmax and layernorm."""
    d_model, h, _, batch, tokens, vocab = CONFIGS[config]
    cases = []

    scores = rng.standard_normal((batch * h, tokens, tokens)).astype(dtype)
    scale = 1.0 / math.sqrt(d_model // h)
    y = FORMULA["softmax_forward"](scores, scale)
    grad = rng.standard_normal(scores.shape).astype(dtype)
    cases.append(("softmax", scores.shape, {
        "numba": (lambda: sm.softmax_forward_numba(scores, scale),
                  lambda: sm.softmax_backward_numba(y, grad, scale)),
        "numpy": (lambda: FORMULA["softmax_forward"](scores, scale),
                  lambda: FORMULA["softmax_backward"](y, grad, scale)),
    }, (scores, y, grad, scale)))

    logits = rng.standard_normal((batch * tokens, vocab)).astype(dtype)
    log_y = FORMULA["log_softmax_forward"](logits)
    log_grad = rng.standard_normal(logits.shape).astype(dtype)
    cases.append(("log_softmax", logits.shape, {
        "numba": (lambda: sm.log_softmax_forward_numba(logits),
                  lambda: sm.log_softmax_backward_numba(log_y, log_grad)),
        "numpy": (lambda: FORMULA["log_softmax_forward"](logits),
                  lambda: FORMULA["log_softmax_backward"](log_y, log_grad)),
    }, (logits, log_y, log_grad)))

    x = rng.standard_normal((batch * tokens, d_model)).astype(dtype)
    gamma = rng.standard_normal(d_model).astype(dtype)
    beta = rng.standard_normal(d_model).astype(dtype)
    _, mean, rstd = FORMULA["layernorm_forward"](x, gamma, beta)
    dy = rng.standard_normal(x.shape).astype(dtype)
    cases.append(("layernorm", x.shape, {
        "numba": (lambda: ln.layernorm_forward_numba(x, gamma, beta),
                  lambda: ln.layernorm_backward_numba(dy, x, gamma, mean, rstd)),
        "numpy": (lambda: FORMULA["layernorm_forward"](x, gamma, beta),
                  lambda: FORMULA["layernorm_backward"](dy, x, gamma, mean, rstd)),
    }, (x, gamma, beta, dy)))
    return cases


def torch_last_axis(torch, kernel, data):
    """(forward, backward) closures calling PyTorch's own CPU kernels on the same data."""
    if kernel == "softmax":
        # torch gets pre-scaled scores and skips the backward's * scale: its timing covers the
        # softmax alone while ours includes the fused scale (conservative for us).
        scores, y, grad, scale = data
        scaled, y, grad = (torch.from_numpy(a) for a in (scores * scale, y, grad))
        return (lambda: torch._softmax(scaled, -1, False),
                lambda: torch._softmax_backward_data(grad, y, -1, y.dtype))
    if kernel == "log_softmax":
        logits, log_y, log_grad = (torch.from_numpy(a) for a in data)
        return (lambda: torch._log_softmax(logits, -1, False),
                lambda: torch._log_softmax_backward_data(log_grad, log_y, -1, log_y.dtype))
    x, gamma, beta, dy = (torch.from_numpy(a) for a in data)
    n = x.shape[-1]
    _, mean, rstd = torch.native_layer_norm(x, (n,), gamma, beta, 1e-5)
    return (lambda: torch.native_layer_norm(x, (n,), gamma, beta, 1e-5),
            lambda: torch.ops.aten.native_layer_norm_backward(dy, x, (n,), mean, rstd, gamma,
                                                              beta, [True, True, True]))


def matmul_cases(config, dtype, rng):
    """(label, a, b, trans_b) for the projections, feed-forward and attention products."""
    d_model, h, d_ff, batch, tokens, _ = CONFIGS[config]
    d_k, rows = d_model // h, batch * tokens

    def randn(*shape):
        return rng.standard_normal(shape).astype(dtype)

    return [
        ("x W_Q (projection)", randn(rows, d_model), randn(d_model, d_model), False),
        ("x W_1 (FFN in)", randn(rows, d_model), randn(d_model, d_ff), False),
        ("h W_2 (FFN out)", randn(rows, d_ff), randn(d_ff, d_model), False),
        ("Q K^T (trans_b)", randn(batch * h, tokens, d_k), randn(batch * h, tokens, d_k), True),
        ("A V", randn(batch * h, tokens, tokens), randn(batch * h, tokens, d_k), False),
    ]


# --------------------------------------------------------------------------------- tables

def fmt(value):
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def markdown(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(out)


def bench_last_axis(configs, dtype, repeats, torch, rng, targets):
    rows = []
    for config in configs:
        for kernel, shape, impls, data in last_axis_cases(config, dtype, rng):
            theirs = torch_last_axis(torch, kernel, data) if torch else None
            totals = {"numba": 0.0, "numpy": 0.0, "torch": 0.0}
            for index, direction in enumerate(("fwd", "bwd")):
                t_numba = median_us(impls["numba"][index], repeats)
                t_numpy = median_us(impls["numpy"][index], repeats)
                t_torch = median_us(theirs[index], repeats) if theirs else math.nan
                totals["numba"] += t_numba
                totals["numpy"] += t_numpy
                totals["torch"] += t_torch
                rows.append((config, kernel, direction, str(shape), t_numba, t_numpy, t_torch,
                             ratio(t_numpy, t_numba), ratio(t_torch, t_numba)))
            rows.append((config, kernel, "fwd+bwd", str(shape), totals["numba"], totals["numpy"],
                         totals["torch"], ratio(totals["numpy"], totals["numba"]),
                         ratio(totals["torch"], totals["numba"])))
            if kernel in ("softmax", "layernorm"):
                targets.append((f"{config} {kernel} fwd+bwd >= 2x NumPy twin",
                                ratio(totals["numpy"], totals["numba"]) >= 2.0))
                if torch:
                    targets.append((f"{config} {kernel} fwd+bwd no slower than torch",
                                    ratio(totals["torch"], totals["numba"]) >= 1.0))
    headers = ["config", "kernel", "pass", "shape", "numba us", "numpy twin us", "torch us",
               "x twin", "x torch"]
    return markdown(headers, rows)


def bench_matmul(configs, dtype, repeats, torch, rng, targets):
    rows = []
    for config in configs:
        for label, a, b, trans_b in matmul_cases(config, dtype, rng):
            rows += bench_matmul_case(config, label, a, b, trans_b, repeats, torch, rng, targets)
    headers = ["config", "product", "pass", "shape", "matmul path us", "np.matmul us", "torch us",
               "np/path"]
    return markdown(headers, rows)


def bench_matmul_case(config, label, a, b, trans_b, repeats, torch, rng, targets):
    """Rows for one product: our path (the op, Tensor.matmul: its formula in ops/binary.py, forward,
    and its backward from the output's gradient), bare np.matmul calls computing the same products
    (forward: a @ op(b); backward: the two products the op's backward computes), and torch.matmul."""
    b_op, a_t = (np.swapaxes(b, -1, -2) if trans_b else b), np.swapaxes(a, -1, -2)
    ta, tb = Tensor(a, requires_grad=True), Tensor(b_op, requires_grad=True)
    c = ta @ tb
    dc = rng.standard_normal(c.shape).astype(a.dtype)

    def path():
        return ta @ tb

    def path_backward():
        return c._backward(dc)  # the op's backward alone: dA = dC·Bᵀ, dB = Aᵀ·dC

    def bare():
        return np.matmul(a, b_op)

    def bare_backward():
        db = np.matmul(np.swapaxes(dc, -1, -2), a) if trans_b else np.matmul(a_t, dc)
        return np.matmul(dc, np.swapaxes(b_op, -1, -2)), db

    times = {"path": (median_us(path, repeats), median_us(path_backward, repeats))}
    times["np"] = (median_us(bare, repeats), median_us(bare_backward, repeats))
    times["torch"] = (math.nan, math.nan)
    if torch:
        ta, tdc = torch.from_numpy(a), torch.from_numpy(dc)
        tb_op = torch.from_numpy(b).transpose(-1, -2) if trans_b else torch.from_numpy(b)

        def theirs():
            return torch.matmul(ta, tb_op)

        def theirs_backward():
            return torch.matmul(tdc, tb_op.transpose(-1, -2)), torch.matmul(ta.transpose(-1, -2),
                                                                            tdc)

        times["torch"] = (median_us(theirs, repeats), median_us(theirs_backward, repeats))
    shape = f"{a.shape}@{b.shape}{'^T' if trans_b else ''}"
    rows = []
    for index, direction in enumerate(("fwd", "bwd")):
        ours, blas = times["path"][index], times["np"][index]
        rows.append((config, label, direction, shape, ours, blas, times["torch"][index],
                     ratio(blas, ours)))
        where = f"{config} {label} {direction}"
        targets.append((f"{where}: matmul path within 1.2x of np.matmul", ours <= 1.2 * blas))
    return rows


# --------------------------------------------------------------------------------- main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="threads for numba, torch, BLAS")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--repeats", type=int, default=25, help="timed samples per row")
    parser.add_argument("--configs", default="small,base", help="comma list: small,base")
    parser.add_argument("--skip-compile", action="store_true", help="skip the compile-time probe")
    args = parser.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown or args.threads < 1:
        parser.error(f"--configs takes {sorted(CONFIGS)} (got {unknown}); --threads must be >= 1")
    dtype = np.dtype(args.dtype).type

    numba, torch, _limiter = set_threads(args.threads, dtype)
    rng = np.random.default_rng(0)
    print("## Environment\n")
    print("\n".join(f"- {line}" for line in describe_environment(numba, torch, args.threads,
                                                                 dtype)))
    if not args.skip_compile:
        print("\n## Numba compile and cache-load time (fresh process each, seconds)\n")
        times = compile_times()
        steps = list(next(iter(times.values())))
        print(markdown(["step"] + list(times), [[s] + [times[p][s] for p in times]
                                                for s in steps]))
    targets = []
    print(f"\n## Softmax, log-softmax, layer norm ({np.dtype(dtype).name}, us per call)\n")
    print(bench_last_axis(configs, dtype, args.repeats, torch, rng, targets))
    print(f"\n## Matmul ({np.dtype(dtype).name}, us per call)\n")
    print(bench_matmul(configs, dtype, args.repeats, torch, rng, targets))
    print("\n## Targets\n")
    for name, met in targets:
        print(f"- {'MET    ' if met else 'NOT MET'} {name}")


if __name__ == "__main__":
    main()
