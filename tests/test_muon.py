"""optim.Muon: trajectories against torch.optim.Muon fed the very same gradients (its Newton–Schulz
run in float32 like ours, and as PyTorch ships it, in bfloat16), what the orthogonalization does to
singular values, state dicts and bad input."""
import numpy as np
import pytest

from tinygrad_lite import nn, optim
from tinygrad_lite.optim.muon import newton_schulz

SHAPES = [(6, 4), (4, 10), (5, 5)]          # tall, wide, square
STEPS = 12


def weights_and_gradients(seed=0):
    g = np.random.default_rng(seed)
    weights = [g.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[None if (i == 2 and step % 4 == 3) else g.standard_normal(s).astype(np.float32) for i, s in
              enumerate(SHAPES)] for step in range(STEPS)]
    return weights, grads


def run_ours(weights, grads, **kwargs):
    params = [nn.Parameter(w.copy()) for w in weights]
    opt = optim.Muon(params, **kwargs)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else g.copy()
        opt.step()
    return [p.data for p in params]


def run_torch(torch, weights, grads, **kwargs):
    params = [torch.nn.Parameter(torch.tensor(w)) for w in weights]
    opt = torch.optim.Muon(params, **kwargs)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params]


def float32_newton_schulz(grad, ns_coefficients, ns_steps, eps):
    """torch's own _zeropower_via_newtonschulz without its bfloat16 cast: the twin's (torch_twin.SplitMuon)."""
    from transformer.gpt.torch_twin import SplitMuon
    return SplitMuon.orthogonalize(grad, ns_coefficients, ns_steps, eps)


SETTINGS = [dict(lr=0.02), dict(lr=0.05, weight_decay=0.0, nesterov=False),
            dict(lr=3e-3, momentum=0.9, adjust_lr_fn="match_rms_adamw", ns_steps=3)]


@pytest.mark.parametrize("kwargs", SETTINGS, ids=["defaults", "no_nesterov_no_decay", "match_rms_adamw"])
def test_trajectory_matches_torch_with_the_same_products(kwargs, monkeypatch):
    torch = pytest.importorskip("torch")
    from torch.optim import _muon
    monkeypatch.setattr(_muon, "_zeropower_via_newtonschulz", float32_newton_schulz)
    weights, grads = weights_and_gradients()
    for ours, ref in zip(run_ours(weights, grads, **kwargs), run_torch(torch, weights, grads, **kwargs)):
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)


def test_one_step_is_torch_shipped_muon_up_to_its_bfloat16_products():
    torch = pytest.importorskip("torch")
    weights, grads = weights_and_gradients(seed=3)
    kwargs = dict(lr=0.1, weight_decay=0.0)
    for w, ours, ref in zip(weights, run_ours(weights, grads[:1], **kwargs),
                            run_torch(torch, weights, grads[:1], **kwargs)):
        ours_step, ref_step = ours - w, ref - w
        assert np.linalg.norm(ours_step - ref_step) < 0.03 * np.linalg.norm(ref_step)  # bf16: 8 mantissa bits


@pytest.mark.parametrize("shape", [(64, 32), (32, 64), (48, 48)])
def test_newton_schulz_keeps_the_singular_vectors_and_evens_out_the_values(shape):
    G = np.random.default_rng(1).standard_normal(shape)
    U, S, Vt = np.linalg.svd(G, full_matrices=False)
    ortho = newton_schulz(G)
    s = np.linalg.svd(ortho, compute_uv=False)
    assert S.max() / S.min() > 5                                     # uneven before
    assert 0.5 < s.min() and s.max() < 1.5                           # about even after
    in_svd_basis = U.T @ ortho @ Vt.T
    np.testing.assert_allclose(in_svd_basis, np.diag(np.diag(in_svd_basis)), atol=1e-8)  # same U, V


def test_zero_gradient_leaves_a_matrix_only_decayed():
    p = nn.Parameter(np.ones((3, 4), np.float32))
    p.grad = np.zeros((3, 4), np.float32)
    optim.Muon([p], lr=0.1, weight_decay=0.5).step()
    np.testing.assert_allclose(p.data, 0.95)


def test_state_dict_round_trip_continues_identically():
    weights, grads = weights_and_gradients(seed=2)
    straight = run_ours(weights, grads, lr=0.02)
    params = [nn.Parameter(w.copy()) for w in weights]
    opt = optim.Muon(params, lr=0.02)
    for step, step_grads in enumerate(grads):
        if step == STEPS // 2:
            saved = opt.state_dict()
            opt = optim.Muon(params, lr=0.5)
            opt.load_state_dict(saved)
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else g.copy()
        opt.step()
    for a, b in zip(straight, [p.data for p in params]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=-1.0), "lr"),
    (dict(momentum=1.0), "momentum"),
    (dict(ns_steps=0), "ns_steps"),
    (dict(ns_steps=100), "ns_steps"),
    (dict(ns_coefficients=(1.0, 2.0)), "ns_coefficients"),
    (dict(adjust_lr_fn="rms"), "adjust_lr_fn"),
])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        optim.Muon([nn.Parameter(np.zeros((2, 2), np.float32))], **kwargs)


def test_a_vector_or_a_3d_tensor_is_refused_with_its_shape():
    shapes = r"\[\(4,\), \(2, 2, 2\)\]"
    with pytest.raises(ValueError, match="Muon: every parameter must be a 2-D matrix, got shapes " + shapes):
        optim.Muon([nn.Parameter(np.zeros(4)), nn.Parameter(np.zeros((2, 2))), nn.Parameter(np.zeros((2, 2, 2)))])


def test_combined_optimizer_steps_each_and_round_trips_its_state():
    weights, grads = weights_and_gradients(seed=4)
    vector = np.random.default_rng(5).standard_normal(3).astype(np.float32)

    def build(lr_muon=0.02):
        params = [nn.Parameter(w.copy()) for w in weights]
        bias = nn.Parameter(vector.copy())
        return params, bias, optim.CombinedOptimizer(optim.Muon(params, lr=lr_muon), optim.AdamW([bias], lr=0.01))

    params, bias, opt = build()
    alone = run_ours(weights, grads, lr=0.02)
    for step, step_grads in enumerate(grads):
        if step == STEPS // 2:
            saved = opt.state_dict()
            params2, bias2, opt = build(lr_muon=0.5)
            for new, old in zip(params2 + [bias2], params + [bias]):
                new.data[...] = old.data
            params, bias = params2, bias2
            opt.load_state_dict(saved)
        opt.zero_grad()
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else g.copy()
        bias.grad = np.ones(3, np.float32)
        opt.step()
    for a, b in zip(alone, [p.data for p in params]):
        np.testing.assert_array_equal(a, b)
    assert len(opt.param_groups) == 2 and opt.param_groups[0]["lr"] == 0.02
    assert np.all(bias.data < vector)                       # AdamW moved the bias down its gradient


def test_combined_optimizer_refuses_a_shared_parameter_and_a_foreign_state():
    w = nn.Parameter(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="more than one of the optimizers"):
        optim.CombinedOptimizer(optim.Muon([w]), optim.AdamW([w]))
    with pytest.raises(TypeError, match="expected one or more optimizers"):
        optim.CombinedOptimizer([optim.Muon([w])])
    opt = optim.CombinedOptimizer(optim.Muon([w]))
    with pytest.raises(ValueError, match=r"saved optimizers \['AdamW'\], this one holds \['Muon'\]"):
        opt.load_state_dict(optim.CombinedOptimizer(optim.AdamW([w])).state_dict())
