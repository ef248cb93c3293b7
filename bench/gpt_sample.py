"""GPT sampling speed: tinygrad-lite's generate against the PyTorch twin, side by side in one process.

    python bench/gpt_sample.py                              # nanoGPT's CPU recipe, 500 tokens, 1 thread
    python bench/gpt_sample.py --block-size 128             # the model `gpt train` makes by default
    python bench/gpt_sample.py --repeats 9 --json out.jsonl
    python bench/gpt_sample.py --profile                    # also cProfile one of our samples
    python bench/gpt_sample.py --quick                      # seconds; what the smoke test runs

The model is nanoGPT's CPU recipe (4 layers, 4 heads, n_embd 128, block_size 64, vocab 65), random
weights (speed does not depend on them), the same on both sides. Each side writes --new-tokens tokens
after a short prompt, greedy (temperature 0) and sampled (nanoGPT's sample.py: temperature 0.8, top_k 200).

    ours         transformer.gpt.sampling.generate: the KV cache; when the window is full, it restarts
                 from its last block_size // 2 tokens (the module's docstring); the gpt_kernel trick on
    ours-plain   the same without the trick: GPT.forward with its Tensor cache
    torch        nanoGPT's generate: crop to the last block_size tokens, the full forward for every token
                 (the logits of the last position only, as nanoGPT's inference forward)
    torch+cache  the twin's modules with a KV cache and our window policy: the same arithmetic as ours

Sides alternate sample by sample (their order flipping each repeat) and the median tokens/s is
reported, with ours/theirs (> 1: we are faster). Greedy runs of ours and torch+cache compute the same
thing, so the report also says how many leading tokens they agree on (random weights make logits
near-ties, which float32 rounding may break differently).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_throughput import CLOCKS, append_json, markdown, median, start  # noqa: E402

RECIPE = dict(vocab_size=65, n_layer=4, n_head=4, n_embd=128, block_size=64, dropout=0.0, bias=False)
QUICK = dict(vocab_size=65, n_layer=1, n_head=2, n_embd=32, block_size=16, dropout=0.0, bias=False)
PROMPT = [30, 27, 25, 17, 27, 10]  # "ROMEO:" in tinyshakespeare's character ids
MODES = {"greedy": dict(temperature=0.0, top_k=None), "sampled": dict(temperature=0.8, top_k=200)}


def build(config):
    """(ours, the PyTorch twin) with the same weights, both in eval mode."""
    import tinygrad_lite as tl
    from transformer.gpt import GPT
    from transformer.gpt.interop import to_nanogpt_state_dict, torch_gpt
    tl.manual_seed(0)
    ours = GPT(config)
    theirs = torch_gpt(config)
    theirs.load_state_dict(to_nanogpt_state_dict(ours))
    return ours.eval(), theirs.eval()


def ours_sample(model, new_tokens: int, temperature: float, top_k, seed: int = 0) -> list:
    from transformer.gpt.sampling import generate
    return list(generate(model, PROMPT, new_tokens, temperature=temperature, top_k=top_k, seed=seed))


def ours_plain_sample(model, new_tokens: int, temperature: float, top_k, seed: int = 0) -> list:
    """Ours without the gpt_kernel trick: GPT.forward with its Tensor cache, each step ~150 Tensor ops."""
    from tinygrad_lite import fast
    with fast.tricks_off("gpt_kernel"):
        return ours_sample(model, new_tokens, temperature, top_k, seed)


# ------------------------------------------------------------------ the PyTorch side

def _embed(model, idx, start: int):
    import torch
    tr = model.transformer
    return tr.drop(tr.wte(idx) + tr.wpe(torch.arange(start, start + idx.shape[1])))


def _last_logits(model, x):
    return model.lm_head(model.transformer.ln_f(x[:, -1]))[0]        # (vocab,): the last position only


def _choose(logits, temperature: float, top_k, generator):
    """nanoGPT's choice: greedy argmax, or logits / T, top-k, softmax, torch.multinomial."""
    import torch
    from torch.nn import functional as F
    if temperature == 0:
        return int(torch.argmax(logits))
    logits = logits / temperature
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.shape[-1]))
        logits[logits < v[-1]] = -float("inf")
    return int(torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator))


def torch_sample(model, new_tokens: int, temperature: float, top_k, seed: int = 0) -> list:
    """nanoGPT's generate: the last block_size tokens through the full forward, every token."""
    import torch
    generator = torch.Generator().manual_seed(seed)
    idx = torch.tensor([PROMPT])
    block_size = model.config.block_size
    out = []
    with torch.inference_mode():
        for _ in range(new_tokens):
            window = idx[:, -block_size:]
            x = _embed(model, window, 0)
            for block in model.transformer.h:
                x = block(x)
            token = _choose(_last_logits(model, x), temperature, top_k, generator)
            out.append(token)
            idx = torch.cat([idx, torch.tensor([[token]])], dim=1)
    return out


def _cached_block(block, x, cache: dict):
    """A pre-LN nanoGPT block on the new positions x (1, T, C), their keys and values after the cached ones."""
    import torch
    from torch.nn import functional as F
    attn = block.attn
    B, T, C = x.shape
    q, k, v = (t.view(B, T, attn.n_head, C // attn.n_head).transpose(1, 2)
               for t in attn.c_attn(block.ln_1(x)).split(C, dim=2))
    if "k" in cache:
        k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
    cache["k"], cache["v"] = k, v
    y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)       # a fresh window's prefill, or 1 query
    x = x + attn.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
    return x + block.mlp(block.ln_2(x))


def torch_cached_sample(model, new_tokens: int, temperature: float, top_k, seed: int = 0) -> list:
    """The twin with a KV cache and our window policy: restart from the last block_size // 2 tokens when full."""
    import torch
    generator = torch.Generator().manual_seed(seed)
    block_size = model.config.block_size
    keep = max(1, block_size // 2)
    tokens = list(PROMPT)
    start, caches, out = max(0, len(tokens) - block_size), None, []
    with torch.inference_mode():
        for _ in range(new_tokens):
            if caches is None:
                caches = [{} for _ in model.transformer.h]
            fed = caches[0]["k"].shape[2] if "k" in caches[0] else 0
            x = _embed(model, torch.tensor([tokens[start + fed:]]), fed)
            for block, cache in zip(model.transformer.h, caches):
                x = _cached_block(block, x, cache)
            token = _choose(_last_logits(model, x), temperature, top_k, generator)
            out.append(token)
            tokens.append(token)
            if len(tokens) - start > block_size:
                start, caches = len(tokens) - keep, None
    return out


# ------------------------------------------------------------------ timing

SIDES = {"ours": ours_sample, "ours-plain": ours_plain_sample, "torch": torch_sample,
         "torch+cache": torch_cached_sample}


def time_sides(models: dict, mode: dict, new_tokens: int, repeats: int, clock) -> tuple[dict, dict]:
    """({side: [tokens/s per repeat]}, {side: the tokens of its last run}); sides alternate."""
    runs = {side: (lambda fn=fn, m=models[side]: fn(m, new_tokens, **mode)) for side, fn in SIDES.items()}
    tokens = {side: run() for side, run in runs.items()}                 # warm up (compiles, allocations)
    rates = {side: [] for side in runs}
    order = list(runs)
    for r in range(repeats):
        for side in (order if r % 2 == 0 else order[::-1]):
            begin = clock()
            tokens[side] = runs[side]()
            rates[side].append(new_tokens / (clock() - begin))
    return rates, tokens


def leading_agreement(a: list, b: list) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def run(args, threads: int) -> list:
    from transformer.gpt import GPTConfig
    config = GPTConfig(**(QUICK if args.quick else {**RECIPE, "block_size": args.block_size}))
    ours, theirs = build(config)
    models = {"ours": ours, "ours-plain": ours, "torch": theirs, "torch+cache": theirs}
    new_tokens, repeats = (40, 1) if args.quick else (args.new_tokens, args.repeats)
    rows = []
    for name, mode in MODES.items():
        rates, tokens = time_sides(models, mode, new_tokens, repeats, CLOCKS[args.clock])
        tok_s = {side: median(values) for side, values in rates.items()}
        rows.append({"mode": name, "config": "quick" if args.quick else "nanogpt-cpu", "threads": threads,
                     "new_tokens": new_tokens, "repeats": repeats, **config.to_dict(),
                     **{f"tok_s_{side}": value for side, value in tok_s.items()},
                     "ours_over_torch": tok_s["ours"] / tok_s["torch"],
                     "ours_over_torch_cache": tok_s["ours"] / tok_s["torch+cache"],
                     "kernel_over_plain": tok_s["ours"] / tok_s["ours-plain"],
                     "greedy_agreement": leading_agreement(tokens["ours"], tokens["torch+cache"])
                     if name == "greedy" else None})
    return rows


def report(rows: list) -> None:
    print()
    print(markdown(["mode", "ours tok/s", "ours-plain tok/s", "torch tok/s", "torch+cache tok/s", "ours/torch",
                    "ours/torch+cache", "ours/ours-plain"],
                   [[r["mode"], r["tok_s_ours"], r["tok_s_ours-plain"], r["tok_s_torch"], r["tok_s_torch+cache"],
                     r["ours_over_torch"], r["ours_over_torch_cache"], r["kernel_over_plain"]] for r in rows]))
    for r in rows:
        if r["greedy_agreement"] is not None:
            print(f"\ngreedy: ours and torch+cache agree on the first {r['greedy_agreement']} of "
                  f"{r['new_tokens']} tokens")


def profile(args) -> str:
    """cProfile of one of our greedy samples: the functions by their own time."""
    from transformer.gpt import GPTConfig
    ours, _ = build(GPTConfig(**(QUICK if args.quick else {**RECIPE, "block_size": args.block_size})))
    ours_sample(ours, 8, 0.0, None)  # compile and warm up outside the profile
    profiler = cProfile.Profile()
    profiler.enable()
    ours_sample(ours, args.new_tokens, 0.0, None)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    return out.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=500, help="tokens each sample writes (default 500)")
    parser.add_argument("--block-size", type=int, default=64,
                        help="the model's context (default 64, nanoGPT's recipe; gpt train's default is 128)")
    parser.add_argument("--repeats", type=int, default=5, help="timed samples per side (the median is reported)")
    parser.add_argument("--threads", type=int, default=1, help="threads for both sides (default 1)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="this process's CPU time (default; steadier on a shared machine) or wall time")
    parser.add_argument("--profile", action="store_true", help="also cProfile one of our greedy samples")
    parser.add_argument("--json", help="append each result row as one JSON line to this file")
    parser.add_argument("--quick", action="store_true", help="a seconds-long run on a toy model (smoke test)")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.new_tokens < 1 or args.repeats < 1:
        parser.error("--threads, --new-tokens and --repeats must be >= 1")
    _, env = start(parser, args.threads)
    from tinygrad_lite.threads import use_num_threads
    use_num_threads(args.threads, op="bench/gpt_sample.py")
    rows = [{**row, **env} for row in run(args, args.threads)]
    report(rows)
    for row in rows:
        append_json(args.json, row)
    if args.profile:
        print(profile(args))


if __name__ == "__main__":
    main()
