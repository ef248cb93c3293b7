"""bench/ctranslate2_model.py: our Transformer converted through CTranslate2's spec API computes
the same function: the same teacher-forced log-probabilities, and the same greedy tokens.

Every variant the converter maps (post-LN / pre-LN, with and without the closing norms, tied
target embedding and generator) on a small random model whose LayerNorms are random too (at
their initial 1/0 a closing norm after a post-LN layer would be nearly a no-op and go untested).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

ctranslate2 = pytest.importorskip("ctranslate2")

import tinygrad_lite as tl  # noqa: E402
from transformer import Transformer  # noqa: E402
from transformer.decoding import greedy_decode  # noqa: E402
from transformer.fast.decoder_steps import decoder_steps  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))  # bench/ is not a package
import ctranslate2_model as ct2m  # noqa: E402

VOCAB, NEW_TOKENS = 40, 12


def random_model(seed: int, **variant) -> Transformer:
    tl.manual_seed(seed)
    model = Transformer(VOCAB, VOCAB, 32, 4, 2, 64, dropout=0.0, **variant)
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():
        if ".norm." in name or name.startswith(("encoder.norm", "decoder.norm")):
            p.data[...] = (1.0 if name.endswith("weight") else 0.0) + 0.3 * rng.standard_normal(p.shape)
    return model.eval()


def source_batch(seed: int) -> np.ndarray:
    src = np.random.default_rng(seed + 100).integers(4, VOCAB, size=(5, 9))
    src[1, 6:] = 0   # right padding, as the bench's batches
    src[3, 3:] = 0
    return src


VARIANTS = [dict(norm_first=False, final_norm=False), dict(norm_first=False, final_norm=True),
            dict(norm_first=True, final_norm=True), dict(norm_first=True, final_norm=False, tie_embeddings=True)]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(k for k, on in v.items() if on) or "post-LN")
def test_converted_model_gives_our_log_probs_and_greedy_tokens(tmp_path, variant):
    model, src = random_model(3, **variant), source_batch(3)
    tokens = ct2m.default_tokens(VOCAB)
    translator = ct2m.translator(ct2m.convert(model, tmp_path / "ct2"), threads=1)

    ours, _ = greedy_decode(model, src, ct2m.BOS, -1, max_len=NEW_TOKENS, steps=decoder_steps(model))
    theirs = ct2m.greedy(translator, src, NEW_TOKENS, tokens)
    assert theirs.shape == ours.shape == (len(src), NEW_TOKENS)

    tgt_in = np.concatenate([np.full((len(src), 1), ct2m.BOS), ours[:, :-1]], axis=1)
    logits = model(src, tgt_in).data.astype(np.float64)
    our_logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    expected = np.take_along_axis(our_logp, ours[..., None], -1)[..., 0]
    got = np.stack(ct2m.log_probs(translator, src, ours, tokens))
    np.testing.assert_allclose(got, expected, atol=2e-4, rtol=0)

    # float32 rounding differs between the engines: a row may only part from ours at a near-tie
    for row, (a, b) in enumerate(zip(ours, theirs)):
        differ = np.flatnonzero(a != b)
        if len(differ):
            step = differ[0]
            gap = our_logp[row, step, a[step]] - our_logp[row, step, b[step]]
            assert gap < 1e-3, f"row {row} parts from ours at step {step} with a clear margin {gap}"


def test_vocabulary_needs_the_special_ids():
    with pytest.raises(ValueError, match="needs the ids of"):
        ct2m.default_tokens(3)


def test_decode_bench_times_ctranslate2_on_the_same_tokens():
    pytest.importorskip("torch")
    import decode
    from train_throughput import QUICK
    row = decode.bench_case(QUICK, batch=3, new_tokens=5, repeats=1, threads=1, with_no_cache=False)
    assert row["sent_s_ct2"] > 0 and row["ms_ct2"] > 0
    assert row["ratio_ours_over_ct2"] == pytest.approx(row["sent_s_ours_cache"] / row["sent_s_ct2"])
    assert row["ct2_rows_parting"] == row["ct2_rows_parting_near_tie"]  # any difference is a rounding flip
    assert row["same_tokens_ct2"] == 1.0 or row["ct2_rows_parting"] > 0
    assert row["ratio_ours_over_ct2"] == row["ratio_ours_over_ct2_wall"] and row["ratio_ours_over_ct2_cpu"] > 0
    assert all(row[f"cores_{side}"] > 0 for side in ("ours", "torch", "ct2"))


def test_pin_to_one_cpu_reaches_every_thread_old_and_new():
    """In a child process (pinning this one would outlive the test): a thread started before
    the pin and one started after it both end up on the one CPU."""
    import subprocess
    code = """
import os, sys, threading
sys.path.insert(0, sys.argv[1])
import decode
before = threading.Event()
threading.Thread(target=before.wait, daemon=True).start()
cpu = decode.pin_to_one_cpu()
after = threading.Event()
threading.Thread(target=after.wait, daemon=True).start()
print(cpu)
print(sorted({tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir('/proc/self/task')}))
"""
    bench = str(Path(__file__).resolve().parent.parent / "bench")
    run = subprocess.run([sys.executable, "-c", code, bench], capture_output=True, text=True, check=True)
    cpu, affinities = run.stdout.split("\n")[:2]
    assert affinities == f"[({cpu},)]"


def test_parting_gaps_tells_a_near_tie_from_a_wrong_token():
    import decode
    model, src = random_model(5), source_batch(5)
    ours, _ = greedy_decode(model, src, ct2m.BOS, -1, max_len=6)
    assert decode.parting_gaps(model, src, ours, ours.copy()) == []
    tgt_in = np.concatenate([np.full((len(src), 1), ct2m.BOS), ours[:, :-1]], axis=1)
    wrong = ours.copy()
    wrong[2, 3] = model(src, tgt_in).data[2, 3].argmin()   # the token our model likes least there
    (gap,) = decode.parting_gaps(model, src, ours, wrong)
    assert gap > 1.0
