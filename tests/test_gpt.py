"""transformer.gpt: the decoder-only GPT. No future leakage, cached decoding equals the full forward,
gradients against finite differences, the fast path against fast.plain(), checkpoints; and against
the nanoGPT-shaped PyTorch twin (skipped without torch): equal logits, equal losses step for step."""
import itertools
from pathlib import Path

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import fast, kernels, no_grad
from tinygrad_lite.checkpoint import CheckpointError
from tinygrad_lite.gradcheck import gradcheck
from tinygrad_lite.optim import AdamW, clip_grad_norm_
from transformer.gpt import GPT, GPTConfig, attention_mask
from transformer.gpt.old_names import with_block_names

BACKENDS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(
    kernels.backend.load_numba() is None, reason="numba is not installed"))]
VARIANTS = [dict(positions=p, norm_first=n) for p, n in itertools.product(("learned", "sinusoidal"), (True, False))]
VARIANT_IDS = [f"{v['positions']}-{'pre' if v['norm_first'] else 'post'}-LN" for v in VARIANTS]
TINY = dict(vocab_size=23, block_size=16, n_layer=2, n_head=2, n_embd=16)
# nanoGPT's CPU recipe (its README, "I only have a macbook"), vocab of tinyshakespeare's characters
RECIPE = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False)
ADAMW = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)


def tiny(seed=0, dtype=np.float32, **options):
    tl.manual_seed(seed)
    return GPT(GPTConfig(**{**TINY, **options}), dtype=dtype)


def ids(shape, vocab=TINY["vocab_size"], seed=1):
    return np.random.default_rng(seed).integers(0, vocab, size=shape)


# ---------------------------------------------------------------- config and input checks

@pytest.mark.parametrize("bad, error, match", [
    (dict(n_embd=30, n_head=4), ValueError, r"divisible"),
    (dict(vocab_size=0), ValueError, r"vocab_size"),
    (dict(positions="rotary"), ValueError, r"positions must be one of"),
    (dict(activation="swish"), ValueError, r"activation must be one of"),
    (dict(dropout=1.0), ValueError, r"dropout"),
    (dict(bias="no"), TypeError, r"bias must be True or False"),
])
def test_config_is_checked_once(bad, error, match):
    with pytest.raises(error, match=match):
        GPTConfig(**{**TINY, **bad})


def test_config_round_trips_and_takes_nanogpts_model_args():
    c = GPTConfig(**TINY, bias=True, positions="sinusoidal")
    assert GPTConfig.from_dict(c.to_dict()) == c
    nanogpt_args = dict(n_layer=4, n_head=4, n_embd=128, block_size=64, bias=False, vocab_size=65, dropout=0.0)
    assert GPTConfig(**nanogpt_args).d_ff == 512


def test_bad_ids_get_clear_errors():
    model = tiny()
    with pytest.raises(ValueError, match=r"17 tokens exceed block_size=16"):
        model(ids((1, 17)))
    with pytest.raises(ValueError, match=r"token id 23 is outside the vocabulary \[0, 22\]"):
        model(np.array([[1, 23]]))
    with pytest.raises(TypeError, match=r"integer token ids"):
        model(np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"shape \(B, T\)"):
        model(np.array([1, 2]))
    cache = model.new_cache()
    with no_grad():
        model(ids((1, 10)), cache=cache)
        with pytest.raises(ValueError, match=r"7 tokens after 10 cached positions exceed block_size=16"):
            model(ids((1, 7)), cache=cache)
    with pytest.raises(ValueError, match=r"targets must have the shape of idx"):
        model.loss(ids((2, 5)), ids((2, 4)))


# ---------------------------------------------------------------- the model's promises

@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_no_future_leakage(variant):
    """Changing token t+1 never changes the logits at positions <= t; it does change position t+1."""
    model = tiny(**variant)
    x = ids((2, 12))
    with no_grad():
        base = model(x).data
        for t in range(x.shape[1] - 1):
            changed = x.copy()
            changed[:, t + 1] = (changed[:, t + 1] + 1) % TINY["vocab_size"]
            out = model(changed).data
            np.testing.assert_array_equal(out[:, :t + 1], base[:, :t + 1])
            assert np.abs(out[:, t + 1] - base[:, t + 1]).max() > 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_cached_incremental_logits_equal_the_full_forward(variant, backend):
    """A prompt of 5 tokens, then one token a step with the cache: the logits of the full forward."""
    model = tiny(dropout=0.1, **variant).eval()
    x = ids((3, TINY["block_size"]))
    with kernels.use_backend(backend), no_grad():
        full = model(x).data
        cache = model.new_cache()
        steps = [model(x[:, :5], cache=cache).data]
        steps += [model(x[:, t:t + 1], cache=cache).data for t in range(5, x.shape[1])]
        assert model.cache_length(cache) == x.shape[1]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-4, atol=1e-5)


def test_attention_mask_after_a_cache_hides_only_the_future():
    mask = attention_mask(3, 2)[0, 0]
    np.testing.assert_array_equal(mask, [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    assert attention_mask(7, 1) is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_maps_are_causal_distributions_equal_to_softmax_of_q_k(backend):
    """attention_maps: each row a distribution over keys 0..t only; the first block's equal
    softmax(QKᵀ/√d_k) recomputed from its own W^Q, W^K on the embedded input (pre-LN)."""
    model = tiny()
    seq = ids((1, 9))
    with kernels.use_backend(backend):
        maps = model.attention_maps(seq[0])
    assert maps.shape == (TINY["n_layer"], TINY["n_head"], 9, 9) and model.training
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-6)
    assert np.all(np.triu(maps, 1) == 0)
    with no_grad(), fast.plain():
        block = model.blocks[0]
        x = block.ln_1(model.embed(seq)).data[0]
        attn = block.attn
        d_k = attn.d_k
        q = (x @ attn.w_q.weight.data.T).reshape(9, -1, d_k).transpose(1, 0, 2)
        k = (x @ attn.w_k.weight.data.T).reshape(9, -1, d_k).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(d_k) + np.triu(np.full((9, 9), -np.inf), 1)
        expected = np.exp(scores - scores.max(-1, keepdims=True))
        expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(maps[0], expected, atol=1e-5)
    with pytest.raises(ValueError, match="one sequence"):
        model.attention_maps(ids((2, 4)))


@pytest.mark.parametrize("variant", [dict(), dict(positions="sinusoidal", norm_first=False, bias=True,
                                                   activation="gelu")], ids=("gpt2", "paper-options"))
def test_gradients_match_finite_differences(variant):
    model = tiny(dtype=np.float64, n_layer=1, n_embd=8, block_size=6, **variant)
    x, y = ids((2, 5)), ids((2, 5), seed=2)
    assert gradcheck(lambda *_: model.loss(x, y), *model.parameters(), atol=1e-6, rtol=1e-4)


def test_bias_false_has_no_bias_parameters():
    names = [n for n, _ in tiny(bias=False).named_parameters()]
    assert names and not [n for n in names if n.endswith("bias")]
    with_bias = [n for n, _ in tiny(bias=True).named_parameters() if n.endswith("bias")]
    assert len(with_bias) == TINY["n_layer"] * 8 + 1  # 4 projections, 2 FFN Linears, 2 norms; ln_f


def test_init_is_gpt2s_and_the_output_layer_is_the_token_embedding():
    model = GPT(GPTConfig(**RECIPE))
    params = dict(model.named_parameters())
    assert abs(params["token_embedding.weight"].data.std() - 0.02) < 0.002
    assert abs(params["blocks.0.mlp.c_fc.weight"].data.std() - 0.02) < 0.002
    residual = 0.02 / np.sqrt(2 * RECIPE["n_layer"])
    for name in ("blocks.3.attn.w_o.weight", "blocks.3.mlp.c_proj.weight"):
        assert abs(params[name].data.std() - residual) < 0.1 * residual
    V, C, N, T = RECIPE["vocab_size"], RECIPE["n_embd"], RECIPE["n_layer"], RECIPE["block_size"]
    blocks = N * (4 * C * C + 2 * 4 * C * C + 2 * C)  # W^Q, W^K, W^V, W^O; W1, W2; two LayerNorm gains
    assert "lm_head.weight" not in params and model.num_params() == V * C + blocks + C  # nanoGPT: "0.80M"
    assert model.num_params(non_embedding=False) == model.num_params() + T * C
    decay, no_decay = model.param_groups(0.1)
    assert all(p.ndim == 2 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(params)


def test_save_and_load_round_trip(tmp_path):
    model = tiny(bias=True, positions="sinusoidal")
    model.save(tmp_path / "gpt.safetensors", metadata={"tokenizer": {"chars": "abc"}})
    loaded, meta = GPT.load(tmp_path / "gpt.safetensors")
    assert loaded.config == model.config and meta["tokenizer"] == {"chars": "abc"}
    x = ids((2, 9))
    np.testing.assert_array_equal(loaded(x).data, model(x).data)
    tl.checkpoint.save({"w": np.zeros(2, np.float32)}, tmp_path / "other.safetensors", {"format": "x"})
    with pytest.raises(CheckpointError, match=r"is not a GPT checkpoint"):
        GPT.load(tmp_path / "other.safetensors")


OLD_BLOCK_KEYS = [f"{part}.{p}" for part in ("self_attn.w_q", "self_attn.w_k", "self_attn.w_v", "self_attn.w_o",
                                             "add_norm1.norm", "feed_forward.w_1", "feed_forward.w_2", "add_norm2.norm")
                  for p in ("weight", "bias")]  # one block's keys, in order, when blocks were EncoderLayers


def test_a_checkpoint_saved_when_blocks_were_encoder_layers_loads_with_its_logits():
    """tests/fixtures/gpt_with_encoder_layer_names.safetensors: GPT.save of a 2-block GPT (bias=True,
    random biases and gains) before transformer.gpt.block, with the logits it gave in its metadata.
    It loads and gives them again; its parameters keep their order, so a run's optimizer state too."""
    path = Path(__file__).parent / "fixtures" / "gpt_with_encoder_layer_names.safetensors"
    arrays, _ = tl.checkpoint.load(path)
    assert "blocks.1.feed_forward.w_2.bias" in arrays and not any(".mlp." in k for k in arrays)
    model, meta = GPT.load(path)
    with no_grad():
        logits = model.eval()(np.array(meta["ids"])).data
    np.testing.assert_allclose(logits, np.array(meta["logits"], np.float32), rtol=1e-5, atol=1e-6)
    old_order = ["token_embedding.weight", "position_embedding.weight"] + [
        f"blocks.{i}.{key}" for i in range(2) for key in OLD_BLOCK_KEYS] + ["norm.weight", "norm.bias"]
    assert list(with_block_names(dict.fromkeys(old_order))) == [n for n, _ in model.named_parameters()]
    fresh = GPT(model.config)
    fresh.load_state_dict({old: arrays[old] for old in old_order})  # as a run's checkpoint.safetensors
    np.testing.assert_array_equal(fresh.eval()(np.array(meta["ids"])).data, logits)


def test_a_built_in_pattern_is_learned():
    """A repeating 5-token cycle, each row starting elsewhere in it, is predictable from the previous
    token: 60 AdamW steps at lr 1e-2 take the loss from ln(23) ~ 3.1 to under 0.2 (measured 0.015; a
    model blind to its context cannot beat ln(5) ~ 1.61)."""
    model = tiny()
    opt = AdamW(model.param_groups(0.1), lr=1e-2, betas=ADAMW["betas"])
    cycle = np.tile(np.array([3, 7, 1, 9, 4]), 4)
    x = np.stack([np.roll(cycle, -s)[:TINY["block_size"]] for s in range(5)])
    y = np.stack([np.roll(cycle, -s - 1)[:TINY["block_size"]] for s in range(5)])
    for _ in range(60):
        loss = model.loss(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2


# ---------------------------------------------------------------- the fast path against the formula path

def training_step():
    tl.manual_seed(0)
    model = GPT(GPTConfig(**{**RECIPE, "n_layer": 2}))
    x = ids((12, 64), vocab=65)
    loss = model.loss(x[:, :-1], x[:, 1:])
    loss.backward()
    return float(loss.item()), [p.grad.copy() for p in model.parameters()]


def worst_relative(arrays, oracle) -> float:
    return max(float(np.linalg.norm(a - b) / np.linalg.norm(b)) for a, b in zip(arrays, oracle))


@pytest.fixture(scope="module")
def plain_step():
    with fast.plain():
        return training_step()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_training_step_matches_the_formula_path(plain_step, backend):
    with kernels.use_backend(backend), fast.tricks_on():
        loss, grads = training_step()
    plain_loss, plain_grads = plain_step
    assert abs(loss - plain_loss) <= 1e-5 * abs(plain_loss)
    assert len(grads) == len(plain_grads) > 10
    assert worst_relative(grads, plain_grads) <= 1e-4


# ---------------------------------------------------------------- against the PyTorch twin

@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def twins(config: GPTConfig, seed=0):
    from transformer.gpt.interop import to_nanogpt_state_dict, torch_gpt
    tl.manual_seed(seed)
    ours = GPT(config)
    theirs = torch_gpt(config)
    theirs.load_state_dict(to_nanogpt_state_dict(ours))
    return ours, theirs


@pytest.mark.parametrize("variant", [dict(), dict(bias=True, positions="sinusoidal", norm_first=False,
                                                   activation="gelu"), dict(activation="relu")],
                         ids=("recipe", "paper-options", "relu"))
def test_same_logits_as_the_pytorch_twin(torch, variant):
    ours, theirs = twins(GPTConfig(**{**RECIPE, "n_layer": 2, **variant}))
    x = ids((4, 64), vocab=65)
    expected = theirs(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(ours(x).data, expected, rtol=1e-4, atol=1e-4)


def steps_agree(torch, ours, opt, theirs, topts, steps=5):
    """`steps` training steps on both (same batches, clipping at 1.0): equal losses at every one."""
    rng = np.random.default_rng(3)
    for step in range(steps):
        x = rng.integers(0, 65, size=(12, 65))
        loss = ours.loss(x[:, :-1], x[:, 1:])
        opt.zero_grad()
        loss.backward()
        clip_grad_norm_(ours.parameters(), 1.0)
        opt.step()
        tx = torch.from_numpy(x)
        tloss = theirs.loss(tx[:, :-1], tx[:, 1:])
        for o in topts:
            o.zero_grad()
        tloss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        for o in topts:
            o.step()
        assert abs(loss.item() - tloss.item()) <= 1e-4 * tloss.item(), f"step {step}"


def test_same_losses_step_for_step_with_nanogpts_adamw(torch):
    """nanoGPT's recipe, same weights, same batches: 5 AdamW steps with clipping at 1.0."""
    from transformer.gpt.torch_twin import adamw
    ours, theirs = twins(GPTConfig(**RECIPE))
    opt = AdamW(ours.param_groups(ADAMW["weight_decay"]), lr=ADAMW["lr"], betas=ADAMW["betas"])
    steps_agree(torch, ours, opt, theirs, [adamw(theirs, **ADAMW)])


def test_same_losses_step_for_step_with_muon_and_adamw(torch):
    """gpt train's default optimizer on both: Muon for the blocks' matrices (the twin's c_attn as
    W^Q, W^K, W^V), AdamW for the rest; same weights, same batches, 5 steps with clipping."""
    from transformer.gpt.torch_twin import muon_and_adamw
    from transformer.gpt.training import GPTTrainConfig, build_optimizer
    ours, theirs = twins(GPTConfig(**RECIPE))
    opt = build_optimizer(ours, GPTTrainConfig(optimizer="muon", learning_rate=ADAMW["lr"], muon_lr=0.02,
                                               beta2=ADAMW["betas"][1], weight_decay=ADAMW["weight_decay"]))
    steps_agree(torch, ours, opt, theirs, muon_and_adamw(theirs, ADAMW["lr"], 0.02, ADAMW["betas"],
                                                           ADAMW["weight_decay"]))
    from transformer.gpt.interop import to_nanogpt_state_dict
    before, _ = twins(GPTConfig(**RECIPE))
    start, ours_now = to_nanogpt_state_dict(before), to_nanogpt_state_dict(ours)
    theirs_now = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    for key in ("transformer.h.0.attn.c_attn.weight", "transformer.h.3.mlp.c_proj.weight"):
        moved = np.linalg.norm(np.asarray(ours_now[key]) - np.asarray(start[key]))
        assert moved > 0.1 * np.linalg.norm(np.asarray(start[key]))   # 5 steps moved it: a real test
        np.testing.assert_allclose(ours_now[key], theirs_now[key], atol=2e-5, err_msg=key)


def test_nanogpt_state_dict_round_trip(torch):
    from transformer.gpt.interop import load_nanogpt_state_dict, to_nanogpt_state_dict
    config = GPTConfig(**{**RECIPE, "n_layer": 2, "bias": True})
    ours, theirs = twins(config)
    sd = {f"_orig_mod.{k}": v for k, v in theirs.state_dict().items()}  # as torch.compile saves it
    sd["_orig_mod.transformer.h.0.attn.bias"] = torch.ones(1, 1, 64, 64)  # nanoGPT's mask buffer
    loaded = load_nanogpt_state_dict(GPT(config), sd)
    x = ids((2, 64), vocab=65)
    np.testing.assert_allclose(loaded(x).data, theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-4)
    back = to_nanogpt_state_dict(loaded)
    assert set(back) == set(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        np.testing.assert_array_equal(back[k].numpy(), v.numpy())
    with pytest.raises(ValueError, match=r"unexpected keys \['extra.weight'\]"):
        load_nanogpt_state_dict(GPT(config), {**sd, "extra.weight": torch.ones(1)})
