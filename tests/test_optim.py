"""optim: SGD/Adam/AdamW trajectories against PyTorch fed the very same gradients, the
schedulers (NoamLR against the paper's formula), clip_grad_norm_, state dicts and bad input."""
import json
import math

import numpy as np
import pytest

from tinygrad_lite import Tensor, nn, optim
from tinygrad_lite.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, NoamLR, StepLR

SHAPES = [(3, 4), (4,), (2, 2, 2)]
STEPS = 20


def initial_weights(seed=0):
    g = np.random.default_rng(seed)
    return [g.standard_normal(s) for s in SHAPES]


def gradient_stream(seed=1):
    """Per step, one gradient array per parameter; parameter 2 gets no gradient on some steps."""
    g = np.random.default_rng(seed)
    return [[None if (i == 2 and step % 5 == 3) else g.standard_normal(s) * (1 + step % 3)
             for i, s in enumerate(SHAPES)] for step in range(STEPS)]


def run_ours(make, grads, weights, groups=False):
    params = [nn.Parameter(w.copy()) for w in weights]
    opt = make([{"params": params[:2]}, {"params": params[2:], "lr": 0.05}] if groups else params)
    for step, step_grads in enumerate(grads):
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else g.copy()
        if step == 10:
            opt.param_groups[0]["lr"] *= 0.5
        opt.step()
    return [p.data for p in params], opt


def run_torch(torch, make, grads, weights, groups=False):
    params = [torch.nn.Parameter(torch.tensor(w)) for w in weights]
    opt = make([{"params": params[:2]}, {"params": params[2:], "lr": 0.05}] if groups else params)
    for step, step_grads in enumerate(grads):
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else torch.tensor(g)
        if step == 10:
            opt.param_groups[0]["lr"] *= 0.5
        opt.step()
    return [p.detach().numpy() for p in params]


OPTIMIZERS = {
    "sgd": (lambda m: m.SGD, {"lr": 0.1}),
    "sgd_momentum": (lambda m: m.SGD, {"lr": 0.1, "momentum": 0.9}),
    "sgd_dampening_wd": (lambda m: m.SGD, {"lr": 0.1, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.01}),
    "sgd_nesterov_wd": (lambda m: m.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.05}),
    "sgd_wd": (lambda m: m.SGD, {"lr": 0.1, "weight_decay": 0.1}),
    "adam": (lambda m: m.Adam, {"lr": 0.01}),
    "adam_paper_betas_wd": (lambda m: m.Adam, {"lr": 0.02, "betas": (0.9, 0.98), "eps": 1e-9, "weight_decay": 0.1}),
    "adam_large_eps": (lambda m: m.Adam, {"lr": 0.01, "eps": 0.5}),  # so that eps visibly matters
    "adamw": (lambda m: m.AdamW, {"lr": 0.01}),
    "adamw_wd": (lambda m: m.AdamW, {"lr": 0.03, "betas": (0.8, 0.99), "weight_decay": 0.2}),
}


@pytest.mark.parametrize("groups", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_trajectory_matches_torch(name, groups):
    torch = pytest.importorskip("torch")
    cls, kwargs = OPTIMIZERS[name]
    weights, grads = initial_weights(), gradient_stream()
    ours, _ = run_ours(lambda p: cls(optim)(p, **kwargs), grads, weights, groups)
    ref = run_torch(torch, lambda p: cls(torch.optim)(p, **kwargs), grads, weights, groups)
    for a, b, w in zip(ours, ref, weights):
        assert not np.allclose(a, w)  # the parameters did move
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["sgd_nesterov_wd", "adam", "adamw_wd"])
def test_float32_parameters_stay_float32_and_in_place(name):
    cls, kwargs = OPTIMIZERS[name]
    p = nn.Parameter(np.ones((2, 3), np.float32))
    buffer = p.data
    opt = cls(optim)([p], **kwargs)
    for _ in range(3):
        p.grad = np.full((2, 3), 0.5, np.float32)
        opt.step()
    assert p.data is buffer and p.dtype == np.float32
    assert all(v.dtype == np.float32 for v in opt.state[p].values() if isinstance(v, np.ndarray))


def is_json_and_arrays(obj) -> bool:
    if isinstance(obj, np.ndarray):
        return True
    if isinstance(obj, dict):
        return all(isinstance(k, (str, int)) and is_json_and_arrays(v) for k, v in obj.items())
    if isinstance(obj, list):
        return all(is_json_and_arrays(v) for v in obj)
    json.dumps(obj)
    return True


@pytest.mark.parametrize("name", ["sgd_momentum", "adam_paper_betas_wd"])
def test_state_dict_resumes_exactly_and_holds_only_json_and_arrays(name):
    cls, kwargs = OPTIMIZERS[name]
    weights, grads = initial_weights(), gradient_stream()
    straight, _ = run_ours(lambda p: cls(optim)(p, **kwargs), grads, weights)

    half, opt = run_ours(lambda p: cls(optim)(p, **kwargs), grads[:10], weights)
    sd = opt.state_dict()
    assert is_json_and_arrays(sd)
    sd = json.loads(json.dumps(sd, default=lambda a: a.tolist()))  # a JSON round trip: str keys, lists
    sd["state"] = {k: {n: (np.array(v) if isinstance(v, list) else v) for n, v in s.items()}
                   for k, s in sd["state"].items()}
    params = [nn.Parameter(w.copy()) for w in half]
    resumed = cls(optim)(params, **kwargs)
    resumed.load_state_dict(sd)
    resumed.param_groups[0]["lr"] *= 0.5  # as run_ours does at step 10
    for step_grads in grads[10:]:
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else g.copy()
        resumed.step()
    for a, b in zip(straight, params):
        np.testing.assert_allclose(b.data, a, rtol=1e-12)
    if "step" in resumed.state[params[0]]:
        assert resumed.state[params[0]]["step"] == 20


def test_load_state_dict_rejects_a_different_model():
    opt = optim.Adam([nn.Parameter(np.zeros(3))])
    other = optim.Adam([nn.Parameter(np.zeros(3)), nn.Parameter(np.zeros(2))])
    with pytest.raises(ValueError, match="group 0 has 2 saved parameters"):
        opt.load_state_dict(other.state_dict())


def test_params_without_grad_are_skipped_and_zero_grad_clears():
    a, b = nn.Parameter(np.ones(2)), nn.Parameter(np.ones(2))
    opt = optim.SGD([a, b], lr=0.5, momentum=0.9)
    a.grad = np.ones(2)
    opt.step()
    np.testing.assert_array_equal(b.data, 1)
    np.testing.assert_array_equal(a.data, 0.5)
    assert b not in opt.state
    opt.zero_grad()
    assert a.grad is None


def test_generators_and_model_parameters_are_accepted():
    model = nn.MLP([2, 3, 1])
    assert len(optim.AdamW(model.parameters()).param_groups[0]["params"]) == 4


@pytest.mark.parametrize("bad", [
    (lambda: optim.SGD([], lr=0.1), "optimizer got an empty parameter list"),
    (lambda: optim.Adam(p for p in []), "optimizer got an empty parameter list"),
    (lambda: optim.SGD([nn.Parameter(np.zeros(1))], lr=-0.1), "-0.1"),
    (lambda: optim.Adam([nn.Parameter(np.zeros(1))], lr=float("nan")), "nan"),
    (lambda: optim.SGD([nn.Parameter(np.zeros(1))], lr=0.1, nesterov=True), "nesterov"),
    (lambda: optim.Adam([nn.Parameter(np.zeros(1))], betas=(0.9, 1.0)), "beta2"),
    (lambda: optim.Adam([nn.Parameter(np.zeros(1))], eps=-1), "eps"),
    (lambda: optim.SGD([{"params": [nn.Parameter(np.zeros(1))], "lrr": 1}], lr=0.1), "lrr"),
])
def test_bad_hyperparameters_raise_value_error_naming_them(bad):
    make, needle = bad
    with pytest.raises(ValueError) as info:
        make()
    assert needle in str(info.value)


def test_duplicate_and_non_tensor_params_are_rejected():
    p = nn.Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="more than once"):
        optim.SGD([p, p], lr=0.1)
    with pytest.raises(TypeError, match="Tensors/Parameters"):
        optim.SGD([np.zeros(2)], lr=0.1)
    with pytest.raises(TypeError, match="single Tensor"):
        optim.SGD(p, lr=0.1)


# ---------------------------------------------------------------- schedulers
def lr_trace(scheduler, steps):
    lrs = []
    for _ in range(steps):
        lrs.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return lrs


def noam_formula(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def test_noam_follows_the_papers_formula_from_step_one():
    opt = optim.Adam([nn.Parameter(np.zeros(1))], lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    lrs = lr_trace(NoamLR(opt, d_model=512, warmup=4000), 10_000)
    expected = [noam_formula(s, 512, 4000) for s in range(1, 10_001)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
    assert int(np.argmax(lrs)) + 1 == 4000
    np.testing.assert_allclose(max(lrs), 512 ** -0.5 * 4000 ** -0.5)


def test_noam_lr_multiplies_the_optimizers_lr_and_matches_torch_lambda_lr():
    torch = pytest.importorskip("torch")
    ours = NoamLR(optim.SGD([nn.Parameter(np.zeros(1))], lr=2.0), d_model=512, warmup=4000)
    topt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    ref = torch.optim.lr_scheduler.LambdaLR(topt, lambda e: noam_formula(e + 1, 512, 4000))
    ours_lrs = lr_trace(ours, 10_000)
    np.testing.assert_allclose(ours_lrs, lr_trace(ref, 10_000), rtol=1e-12)
    np.testing.assert_allclose(ours_lrs[:3], [2.0 * noam_formula(s, 512, 4000) for s in (1, 2, 3)], rtol=1e-12)


@pytest.mark.parametrize("kind", ["step", "cosine", "lambda"])
def test_schedulers_match_torch(kind):
    torch = pytest.importorskip("torch")
    make = {
        "step": lambda m, o: m.StepLR(o, step_size=7, gamma=0.5),
        "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=20, eta_min=0.01),
        "lambda": lambda m, o: m.LambdaLR(o, lambda e: 0.95 ** e),
    }[kind]
    ours = make(optim.lr_scheduler, optim.SGD([nn.Parameter(np.zeros(1))], lr=0.3))
    ref = make(torch.optim.lr_scheduler, torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.3))
    np.testing.assert_allclose(lr_trace(ours, 50), lr_trace(ref, 50), rtol=1e-9, atol=1e-12)


def test_scheduler_state_dict_resumes_the_schedule():
    opt = optim.SGD([nn.Parameter(np.zeros(1))], lr=1.0)
    sched = NoamLR(opt, d_model=16, warmup=10)
    lr_trace(sched, 25)
    sd = json.loads(json.dumps(sched.state_dict()))
    opt2 = optim.SGD([nn.Parameter(np.zeros(1))], lr=1.0)
    sched2 = NoamLR(opt2, d_model=16, warmup=10)
    sched2.load_state_dict(sd)
    assert lr_trace(sched, 5) == lr_trace(sched2, 5) and sched2.last_epoch == 30


def test_scheduler_rejects_bad_arguments():
    opt = optim.SGD([nn.Parameter(np.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="warmup"):
        NoamLR(opt, d_model=512, warmup=0)
    with pytest.raises(ValueError, match="T_max"):
        CosineAnnealingLR(opt, T_max=0)
    with pytest.raises(ValueError, match="step_size"):
        StepLR(opt, step_size=-1)
    with pytest.raises(ValueError, match="callable"):
        LambdaLR(opt, [lambda e: 1, lambda e: 2])


# ---------------------------------------------------------------- gradient clipping
CLIP_CASES = {
    "no_clip_needed": (lambda g: g * 0.01, 2.0, 1.0),
    "clipped": (lambda g: g, 2.0, 1.0),
    "l1": (lambda g: g, 1.0, 0.5),
    "inf_norm": (lambda g: g, math.inf, 0.5),
    "exploding": (lambda g: g * 1e30, 2.0, 1.0),
    "exploding_float32": (lambda g: (g * 1e20).astype(np.float32), 2.0, 1.0),
}
# PyTorch sums float32 squares in float32, so a norm past ~1.8e19 overflows to inf and clipping
# zeroes the gradients; ours redoes the sum in float64 and clips properly. The reference for that
# case is PyTorch on float64 copies of the same gradients.
REFERENCE_IN_FLOAT64 = {"exploding_float32"}


@pytest.mark.parametrize("name", sorted(CLIP_CASES))
def test_clip_grad_norm_matches_torch(name):
    torch = pytest.importorskip("torch")
    transform, norm_type, max_norm = CLIP_CASES[name]
    grads = [transform(np.random.default_rng(i).standard_normal(s)) for i, s in enumerate(SHAPES)]
    params = [nn.Parameter(np.zeros(s, g.dtype)) for s, g in zip(SHAPES, grads)]
    for p, g in zip(params, grads):
        p.grad = g.copy()
    ref_grads = [g.astype(np.float64) for g in grads] if name in REFERENCE_IN_FLOAT64 else grads
    tparams = [torch.nn.Parameter(torch.zeros(s, dtype=torch.from_numpy(g).dtype)) for s, g in zip(SHAPES, ref_grads)]
    for p, g in zip(tparams, ref_grads):
        p.grad = torch.from_numpy(g.copy())
    total = optim.clip_grad_norm_(params, max_norm, norm_type)
    ref = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type)
    rtol = 1e-5 if grads[0].dtype == np.float32 else 1e-10
    np.testing.assert_allclose(total, float(ref), rtol=rtol)
    for p, tp in zip(params, tparams):
        assert p.grad.dtype == grads[0].dtype
        np.testing.assert_allclose(p.grad, tp.grad.numpy(), rtol=rtol, atol=1e-30)
    after = np.sqrt(sum((p.grad.astype(np.float64) ** 2).sum() for p in params)) if norm_type == 2 else None
    if after is not None:
        assert after <= max_norm * (1 + 1e-5)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_clip_grad_norm_with_nonfinite_gradients_returns_the_norm_like_torch(bad):
    torch = pytest.importorskip("torch")
    g = np.array([1.0, bad, 2.0])
    p = nn.Parameter(np.zeros(3))
    p.grad = g.copy()
    tp = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    tp.grad = torch.from_numpy(g.copy())
    total = optim.clip_grad_norm_([p], 1.0)
    ref = torch.nn.utils.clip_grad_norm_([tp], 1.0)
    assert (math.isnan(total) and math.isnan(float(ref))) or total == float(ref)
    np.testing.assert_array_equal(p.grad, tp.grad.numpy())
    p.grad = g.copy()
    with pytest.raises(FloatingPointError, match="norm"):
        optim.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_single_tensor_and_no_grads():
    p = nn.Parameter(np.zeros(2))
    assert optim.clip_grad_norm_(p, 1.0) == 0.0
    p.grad = np.array([3.0, 4.0])
    assert optim.clip_grad_norm_(p, 1.0) == 5.0
    np.testing.assert_allclose(np.linalg.norm(p.grad), 1.0, rtol=1e-6)
    x = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match="max_norm"):
        optim.clip_grad_norm_([x], -1.0)
