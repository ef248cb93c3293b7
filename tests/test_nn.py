"""nn: Module bookkeeping, the layers against PyTorch, the losses (values, gradients, edge cases)
and gradchecks of each loss and of a Linear+LayerNorm stack in float64."""
import copy
from collections import OrderedDict

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, gradcheck, nn
from tinygrad_lite.autograd import scope_path
from tinygrad_lite.nn import functional as F


def rng(seed=0):
    return np.random.default_rng(seed)


class Block(nn.Module):
    def __init__(self, d, dtype=np.float32):
        super().__init__()
        self.w_q = nn.Linear(d, d, dtype=dtype)
        self.norm = nn.LayerNorm(d, dtype=dtype)

    def forward(self, x):
        return self.norm(self.w_q(x))


class Encoder(nn.Module):
    def __init__(self, vocab=11, d=4, n=2, dtype=np.float32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0, dtype=dtype)
        self.layers = nn.ModuleList([Block(d, dtype) for _ in range(n)])
        self.drop = nn.Dropout(0.5)
        self.register_buffer("pe", np.arange(3 * d, dtype=dtype).reshape(3, d))
        self.register_buffer("cache", np.zeros(2, dtype=dtype), persistent=False)

    def forward(self, ids):
        h = self.drop(self.embed(ids) + self.pe[: ids.shape[1]])
        for layer in self.layers:
            h = layer(h)
        return h


# ---------------------------------------------------------------- Module bookkeeping
def test_named_parameters_are_dotted_paths_in_registration_order():
    names = [n for n, _ in Encoder().named_parameters()]
    assert names == ["embed.weight",
                     "layers.0.w_q.weight", "layers.0.w_q.bias", "layers.0.norm.weight", "layers.0.norm.bias",
                     "layers.1.w_q.weight", "layers.1.w_q.bias", "layers.1.norm.weight", "layers.1.norm.bias"]
    assert [n for n, _ in Encoder().named_buffers()] == ["pe", "cache"]
    assert [n for n, _ in Encoder().named_children()] == ["embed", "layers", "drop"]
    assert len(list(Encoder().modules())) == 1 + 1 + 1 + 2 * 3 + 1


def test_shared_parameter_is_listed_once_but_saved_under_every_name():
    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5, bias=False))
    model[1].weight = model[0].weight  # weight tying, as the paper's §3.4
    assert [n for n, _ in model.named_parameters()] == ["0.weight"]
    assert model.num_parameters() == 15
    sd = model.state_dict()
    assert list(sd) == ["0.weight", "1.weight"]
    np.testing.assert_array_equal(sd["0.weight"], sd["1.weight"])


def test_child_names_give_module_paths_along_the_call_chain():
    model = Encoder()
    seen = {}
    forward = Block.forward

    def spy(self, x):
        out = forward(self, x)
        seen[self._name] = scope_path(out._scope)
        return out
    Block.forward = spy
    try:
        model(np.array([[1, 2, 3]]))
    finally:
        Block.forward = forward
    assert seen == {"layers.0": "layers.0.norm", "layers.1": "layers.1.norm"}
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    assert [m._name for m in seq] == ["0", "1"]


def test_state_dict_is_a_copy_and_round_trips_into_a_fresh_model():
    tl.manual_seed(1)
    a = Encoder()
    tl.manual_seed(2)
    b = Encoder()
    ids = np.array([[1, 4, 0]])
    a.eval(), b.eval()
    assert not np.allclose(a(ids).data, b(ids).data)
    sd = a.state_dict()
    assert list(sd) == ["pe", "embed.weight"] + [n for n, _ in a.named_parameters()][1:]
    assert "cache" not in sd
    sd["embed.weight"][:] = 0
    assert np.abs(a.embed.weight.data).sum() > 0  # the state_dict holds copies
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a(ids).data, b(ids).data)
    b.load_state_dict({k: v.astype(np.float64) for k, v in a.state_dict().items()})
    assert all(p.dtype == np.float32 for p in b.parameters())


def test_strict_load_reports_every_problem_in_one_error_and_loads_nothing():
    model = Encoder()
    before = model.state_dict()
    sd = model.state_dict()
    del sd["layers.1.norm.bias"]
    del sd["pe"]
    sd["layers.0.w_q.weight"] = np.zeros((4, 5), np.float32)
    sd["embed.weight"] = np.zeros((11, 4), np.float32)
    sd["decoder.extra"] = np.zeros(3)
    with pytest.raises(ValueError) as info:
        model.load_state_dict(sd)
    msg = str(info.value)
    for needle in ("layers.1.norm.bias", "pe", "decoder.extra", "layers.0.w_q.weight", "(4, 4)", "(4, 5)"):
        assert needle in msg
    after = model.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_non_strict_load_loads_matching_keys_and_returns_missing_and_unexpected():
    model = Encoder()
    sd = {"embed.weight": np.ones((11, 4)), "other": np.zeros(1)}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert unexpected == ["other"]
    assert "layers.0.w_q.weight" in missing and "embed.weight" not in missing
    np.testing.assert_array_equal(model.embed.weight.data, np.ones((11, 4), np.float32))
    with pytest.raises(ValueError, match="embed.weight: expected shape"):
        model.load_state_dict({"embed.weight": np.ones((3, 4))}, strict=False)


def test_train_and_eval_toggle_dropout_recursively():
    tl.manual_seed(0)
    model = nn.Sequential(nn.Linear(50, 50), nn.Dropout(0.5))
    x = Tensor(rng().standard_normal((8, 50)).astype(np.float32))
    assert model.training and model[1].training
    a, b = model(x).data, model(x).data
    assert not np.array_equal(a, b)
    dropped = (a == 0).mean()
    assert 0.35 < dropped < 0.65
    model.eval()
    assert not model[1].training
    e1, e2 = model(x).data, model(x).data
    np.testing.assert_array_equal(e1, e2)
    np.testing.assert_allclose(e1, F.linear(x, model[0].weight, model[0].bias).data)
    kept = a != 0
    np.testing.assert_allclose(a[kept], 2 * e1[kept], rtol=1e-5)
    assert model.train() is model and model[1].training


def test_repr_is_nested_like_pytorch():
    model = nn.MLP([64, 128, 10], dropout=0.1)
    assert repr(model) == (
        "MLP(\n"
        "  (0): Linear(in_features=64, out_features=128, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.1)\n"
        "  (3): Linear(in_features=128, out_features=10, bias=True)\n"
        ")")
    enc = repr(Encoder())
    assert "(layers): ModuleList(\n    (0): Block(\n      (w_q): Linear(in_features=4" in enc
    assert "(embed): Embedding(11, 4, padding_idx=0)" in enc
    assert "LayerNorm((4,), eps=1e-05, elementwise_affine=True)" in enc
    assert repr(nn.Parameter(np.zeros(2))).startswith("Parameter(")


def test_registration_errors_are_clear():
    class Forgot(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(2))
    with pytest.raises(AttributeError, match="super\\(\\).__init__"):
        Forgot()
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="parameter 'weight'"):
        lin.weight = Tensor(np.zeros((2, 2), np.float32))
    lin.bias = None
    assert [n for n, _ in lin.named_parameters()] == ["weight"]
    with pytest.raises(NotImplementedError):
        nn.Module()(1)
    with pytest.raises(TypeError):
        nn.Parameter(np.arange(3))


def test_zero_grad_apply_to_and_num_parameters():
    model = nn.MLP([3, 4, 2], dtype=np.float64)
    assert model.num_parameters() == 3 * 4 + 4 + 4 * 2 + 2
    x = Tensor(rng().standard_normal((5, 3)))
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    visited = []
    model.apply(lambda m: visited.append(type(m).__name__))
    assert visited == ["Linear", "ReLU", "Linear", "MLP"]
    model.float()
    assert all(p.dtype == np.float32 for p in model.parameters())


def test_deepcopy_makes_independent_layers():
    """The Annotated-Transformer idiom clones(layer, N) must give N layers with their own weights."""
    prototype = Block(3)
    layers = nn.ModuleList([copy.deepcopy(prototype) for _ in range(2)])
    a, b = layers[0].w_q.weight, layers[1].w_q.weight
    assert a is not b and isinstance(b, nn.Parameter)
    np.testing.assert_array_equal(a.data, b.data)
    a.data += 1
    assert not np.array_equal(a.data, b.data)
    assert [n for n, _ in layers.named_parameters()][:2] == ["0.w_q.weight", "0.w_q.bias"]


def test_module_list_behaves_like_a_list():
    ml = nn.ModuleList([nn.ReLU()])
    ml.append(nn.Tanh()).extend([nn.Sigmoid(), nn.GELU()])
    assert len(ml) == 4
    assert isinstance(ml[-1], nn.GELU) and isinstance(ml[1], nn.Tanh)
    assert [type(m).__name__ for m in ml[1:3]] == ["Tanh", "Sigmoid"]
    assert [type(m).__name__ for m in ml] == ["ReLU", "Tanh", "Sigmoid", "GELU"]
    with pytest.raises(IndexError, match="index 4 is out of range for 4 modules"):
        ml[4]
    with pytest.raises(TypeError):
        ml.append(np.zeros(2))
    with pytest.raises(NotImplementedError):
        ml(1)


def test_mlp_builds_the_layers_it_is_asked_for():
    model = nn.MLP([64, 128, 32, 10], act="tanh", dropout=0.2)
    kinds = [type(m).__name__ for m in model]
    assert kinds == ["Linear", "Tanh", "Dropout", "Linear", "Tanh", "Dropout", "Linear"]
    assert [p.shape for p in model.parameters()] == [(128, 64), (128,), (32, 128), (32,), (10, 32), (10,)]
    with pytest.raises(ValueError, match="act must be one of"):
        nn.MLP([2, 2], act="swish")
    with pytest.raises(ValueError, match="at least"):
        nn.MLP([3])


def test_linear_init_is_pytorch_uniform_bound_and_seeded():
    tl.manual_seed(3)
    a = nn.Linear(400, 300)
    tl.manual_seed(3)
    b = nn.Linear(400, 300)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    bound = 1 / np.sqrt(400)
    for p in (a.weight.data, a.bias.data):
        assert np.abs(p).max() <= bound
        assert np.abs(p).max() > 0.95 * bound
    assert abs(a.weight.data.std() - bound / np.sqrt(3)) < 0.02 * bound
    assert a.weight.dtype == np.float32
    emb = nn.Embedding(1000, 64)
    assert abs(emb.weight.data.std() - 1) < 0.02


def test_linear_rejects_wrong_shapes_and_dtypes():
    lin = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="in_features=3"):
        lin(Tensor(np.zeros((4, 5), np.float32)))
    with pytest.raises(TypeError, match="share a dtype"):
        lin(Tensor(np.zeros((4, 3))))
    with pytest.raises(ValueError, match="positive int"):
        nn.Linear(0, 2)


# ---------------------------------------------------------------- layers vs PyTorch
def test_linear_and_layer_norm_match_torch_forward_and_backward():
    torch = pytest.importorskip("torch")
    x = rng(1).standard_normal((2, 3, 5))
    model = Block(5, dtype=np.float64)
    model.norm.weight.data = rng(2).standard_normal(5)
    model.norm.bias.data = rng(3).standard_normal(5)
    tlin, tnorm = torch.nn.Linear(5, 5).double(), torch.nn.LayerNorm(5).double()
    with torch.no_grad():
        for tp, p in zip([tlin.weight, tlin.bias, tnorm.weight, tnorm.bias], model.parameters()):
            tp.copy_(torch.from_numpy(p.data))
    up = rng(4).standard_normal((2, 3, 5))
    xt = Tensor(x, requires_grad=True)
    out = model(xt)
    (out * Tensor(up)).sum().backward()
    xtt = torch.tensor(x, requires_grad=True)
    tout = tnorm(tlin(xtt))
    (tout * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xt.grad, xtt.grad.numpy(), rtol=1e-9, atol=1e-12)
    for tp, p in zip([tlin.weight, tlin.bias, tnorm.weight, tnorm.bias], model.parameters()):
        np.testing.assert_allclose(p.grad, tp.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype, rows", [(np.float32, 780), (np.float64, 37), (np.float32, 0)])
def test_linear_bias_gradient_is_the_column_sum_of_the_output_gradient(dtype, rows):
    """The bias's gradient (a BLAS ones @ g in linear's backward) is g summed over every row, to the
    dtype's rounding, and zeros for an empty batch; the other gradients are untouched by it."""
    x = Tensor(rng(6).standard_normal((rows, 8)).astype(dtype), requires_grad=True)
    lin = nn.Linear(8, 5, dtype=dtype)
    g = rng(7).standard_normal((rows, 5)).astype(dtype)
    (lin(x) * Tensor(g)).sum().backward()
    exact = g.astype(np.float64).sum(axis=0)
    assert lin.bias.grad.dtype == dtype and lin.bias.grad.shape == (5,)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(lin.bias.grad, exact, rtol=tol, atol=tol * max(rows, 1))
    np.testing.assert_allclose(lin.weight.grad, g.T.astype(np.float64) @ x.data, rtol=tol, atol=tol * max(rows, 1))


def test_layer_norm_over_two_trailing_dims_matches_torch():
    torch = pytest.importorskip("torch")
    ln = nn.LayerNorm((3, 4), eps=1e-3, dtype=np.float64)
    x = rng(5).standard_normal((2, 3, 4)) * 4 + 3
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x), (3, 4), eps=1e-3).numpy()
    np.testing.assert_allclose(ln(Tensor(x)).data, ref, rtol=1e-10, atol=1e-12)


def test_embedding_with_padding_idx_matches_torch_and_never_trains_the_padding_row():
    torch = pytest.importorskip("torch")
    emb = nn.Embedding(7, 3, padding_idx=2, dtype=np.float64)
    np.testing.assert_array_equal(emb.weight.data[2], 0)
    temb = torch.nn.Embedding(7, 3, padding_idx=2).double()
    with torch.no_grad():
        temb.weight.copy_(torch.from_numpy(emb.weight.data))
    ids = np.array([[1, 2, 1], [6, 2, 0]])
    up = rng(6).standard_normal((2, 3, 3))
    out = emb(Tensor(ids))
    (out * Tensor(up)).sum().backward()
    tout = temb(torch.from_numpy(ids))
    (tout * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(out.data, tout.detach().numpy())
    np.testing.assert_allclose(emb.weight.grad, temb.weight.grad.numpy(), atol=1e-14)
    np.testing.assert_array_equal(emb.weight.grad[2], 0)
    np.testing.assert_allclose(emb.weight.grad[1], up[0, 0] + up[0, 2])


def test_embedding_rejects_out_of_range_and_non_integer_ids():
    emb = nn.Embedding(10, 4)
    with pytest.raises(IndexError, match=r"id 12 .*vocab size 10"):
        emb(np.array([[1, 12]]))
    with pytest.raises(IndexError, match=r"id -1 "):
        emb(np.array([-1]))
    with pytest.raises(TypeError, match="integer"):
        emb(np.array([1.0]))


@pytest.mark.parametrize("name", ["ReLU", "Tanh", "Sigmoid", "GELU"])
def test_activation_modules_match_torch(name):
    torch = pytest.importorskip("torch")
    x = rng(7).standard_normal((4, 5))
    ours = getattr(nn, name)()(Tensor(x)).data
    ref = getattr(torch.nn, name)()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- losses
CE_CASES = [((6, 5), (6,)), ((3, 4, 2, 3), (3, 2, 3))]


@pytest.mark.parametrize("shapes", CE_CASES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_matches_torch_with_ignore_index_and_smoothing(shapes, reduction, label_smoothing):
    torch = pytest.importorskip("torch")
    (lshape, tshape) = shapes
    g = rng(8)
    logits = g.standard_normal(lshape) * 3
    target = g.integers(0, lshape[1], tshape)
    target.reshape(-1)[[0, 3]] = -1  # ignored positions
    x = Tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, target, ignore_index=-1, label_smoothing=label_smoothing, reduction=reduction)
    xt = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(xt, torch.from_numpy(target), ignore_index=-1,
                                              label_smoothing=label_smoothing, reduction=reduction)
    np.testing.assert_allclose(loss.data, tloss.detach().numpy(), rtol=1e-10, atol=1e-12)
    up = g.standard_normal(tloss.shape)
    (loss * Tensor(up)).sum().backward()
    (tloss * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(x.grad, xt.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_cross_entropy_gradient_is_softmax_minus_onehot_over_n():
    """The article: d loss / d logits = softmax(logits) − one_hot(target), averaged over the batch."""
    logits = rng(9).standard_normal((7, 4))
    target = np.array([0, 3, 1, 1, 2, 0, 3])
    x = Tensor(logits, requires_grad=True)
    F.cross_entropy(x, target).backward()
    e = np.exp(logits - logits.max(1, keepdims=True))
    softmax = e / e.sum(1, keepdims=True)
    onehot = np.eye(4)[target]
    np.testing.assert_allclose(x.grad, (softmax - onehot) / 7, rtol=1e-12, atol=1e-15)


def test_cross_entropy_all_ignored_gives_zero_not_nan():
    x = Tensor(rng(10).standard_normal((3, 4)), requires_grad=True)
    loss = F.cross_entropy(x, np.full(3, -100), label_smoothing=0.1)
    assert loss.item() == 0.0
    loss.backward()
    np.testing.assert_array_equal(x.grad, 0)


def test_cross_entropy_is_stable_for_huge_logits_and_float32():
    logits = np.array([[1000.0, 0.0, -1000.0], [0.0, 0.0, 0.0]], np.float32)
    x = Tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, np.array([2, 1]))
    assert loss.dtype == np.float32
    np.testing.assert_allclose(loss.item(), (2000 + np.log(3)) / 2, rtol=1e-6)
    loss.backward()
    assert np.isfinite(x.grad).all()


def test_cross_entropy_rejects_bad_targets():
    x = Tensor(np.zeros((2, 10)))
    with pytest.raises(IndexError, match=r"target 10 is out of range for 10 classes"):
        F.cross_entropy(x, np.array([3, 10]))
    with pytest.raises(IndexError, match=r"target -2 "):
        F.cross_entropy(x, np.array([-2, 1]))
    with pytest.raises(TypeError, match="integer"):
        F.cross_entropy(x, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="does not fit logits shape"):
        F.cross_entropy(x, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, np.array([0, 1]), reduction="avg")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_and_mse_match_torch(reduction):
    torch = pytest.importorskip("torch")
    g = rng(11)
    logits = g.standard_normal((4, 3)) * 5
    logits[0, 0], logits[1, 1] = 200.0, -200.0
    target = g.random((4, 3))
    x = Tensor(logits, requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(x, target, reduction=reduction)
    xt = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.functional.binary_cross_entropy_with_logits(xt, torch.from_numpy(target), reduction=reduction)
    np.testing.assert_allclose(loss.data, tloss.detach().numpy(), rtol=1e-10)
    up = g.standard_normal(tloss.shape)
    (loss * Tensor(up)).sum().backward()
    (tloss * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(x.grad, xt.grad.numpy(), rtol=1e-9, atol=1e-14)

    x.grad, xt.grad = None, None
    loss = F.mse_loss(x, target, reduction=reduction)
    tloss = torch.nn.functional.mse_loss(xt, torch.from_numpy(target), reduction=reduction)
    np.testing.assert_allclose(loss.data, tloss.detach().numpy(), rtol=1e-10)
    (loss * Tensor(up)).sum().backward()
    (tloss * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(x.grad, xt.grad.numpy(), rtol=1e-9)


def test_losses_reject_shape_mismatch():
    with pytest.raises(ValueError, match="mse_loss: input shape"):
        F.mse_loss(Tensor(np.zeros((2, 3))), np.zeros((3,)))
    with pytest.raises(ValueError, match="binary_cross_entropy_with_logits"):
        F.binary_cross_entropy_with_logits(Tensor(np.zeros((2, 3))), np.zeros((2, 1)))


# ---------------------------------------------------------------- gradchecks (float64)
def test_gradcheck_cross_entropy_with_smoothing_and_ignore_index():
    target = np.array([[0, 2], [-100, 1], [2, 2]])
    x = Tensor(rng(12).standard_normal((3, 3, 2)), requires_grad=True)
    assert gradcheck(lambda t: F.cross_entropy(t, target, label_smoothing=0.2), x)
    assert gradcheck(lambda t: F.cross_entropy(t, target, reduction="none"), x)


def test_gradcheck_bce_with_logits_both_inputs_and_mse():
    x = Tensor(rng(13).standard_normal((3, 4)), requires_grad=True)
    y = Tensor(rng(14).random((3, 4)), requires_grad=True)
    assert gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b), x, y)
    assert gradcheck(lambda a, b: F.mse_loss(a, b, reduction="sum"), x, y)


def test_gradcheck_linear_layernorm_stack_through_all_parameters():
    tl.manual_seed(4)
    model = nn.Sequential(nn.Linear(4, 6, dtype=np.float64), nn.LayerNorm(6, dtype=np.float64),
                          nn.GELU(), nn.Linear(6, 3, dtype=np.float64))
    model[1].weight.data = rng(15).standard_normal(6)
    x = Tensor(rng(16).standard_normal((2, 5, 4)), requires_grad=True)
    assert gradcheck(lambda inp, *params: model(inp), x, *model.parameters())


def test_gradcheck_catches_a_broken_backward():
    """The gradchecks above can fail: a fused op with a wrong backward is caught."""
    def broken_ce(t):
        good = F.cross_entropy(t, np.array([1, 0]))
        return t._make(good.data, "broken", (t,), lambda g: (np.ones_like(t.data) * g,))
    with pytest.raises(tl.GradcheckError):
        gradcheck(broken_ce, Tensor(rng(17).standard_normal((2, 3)), requires_grad=True))


def test_numerical_gradient_is_central_differences_and_refuses_a_copy():
    """The finite differences gradcheck and the kernel tests share: exact for a quadratic, x left
    unchanged, and an error (not silent zeros) when x is a view its perturbations would miss."""
    from tinygrad_lite.gradcheck import numerical_gradient
    x = rng(3).standard_normal((2, 3))
    before = x.copy()
    grad = numerical_gradient(lambda: float((x ** 2).sum() + 3 * x[0, 1]), x)
    expected = 2 * before
    expected[0, 1] += 3
    np.testing.assert_allclose(grad, expected, rtol=1e-7, atol=1e-7)
    np.testing.assert_array_equal(x, before)
    with pytest.raises(ValueError, match="C-contiguous"):
        numerical_gradient(lambda: float(x.sum()), x.T)


def test_sequential_accepts_an_ordered_dict():
    seq = nn.Sequential(OrderedDict(fc=nn.Linear(2, 3), act=nn.ReLU()))
    assert [n for n, _ in seq.named_parameters()] == ["fc.weight", "fc.bias"]
    assert seq(Tensor(np.ones((1, 2), np.float32))).shape == (1, 3)


def test_setitem_replaces_a_child_in_place():
    seq = nn.Sequential(OrderedDict(fc=nn.Linear(2, 3), act=nn.ReLU()))
    seq[1] = nn.Tanh()
    assert [n for n, _ in seq.named_children()] == ["fc", "act"] and isinstance(seq.act, nn.Tanh)
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
    holder = nn.Sequential()
    holder.layers = layers
    layers[0] = nn.Linear(2, 2)
    assert layers[0]._name == "layers.0" and len(layers) == 2


def test_attribute_reads_follow_every_kind_of_registration_change():
    """Registered members live in the registries and are read through Module.__getattr__; every way
    of changing one must keep the attribute and the registry in step."""
    enc = Encoder()
    block = enc.layers[0]
    assert "norm" not in vars(block) and block.norm is block._modules["norm"]
    new_linear = nn.Linear(4, 4)
    block.w_q = new_linear                                     # replace a submodule
    assert block.w_q is new_linear and block._modules["w_q"] is new_linear
    block.w_q = None                                           # remove it (PyTorch allows None)
    assert block.w_q is None and [n for n, _ in block.named_children()] == ["norm"]
    weight = nn.Parameter(np.ones(4, np.float32))
    block.norm.weight = weight                                 # replace a parameter
    assert block.norm.weight is weight and dict(block.norm.named_parameters())["weight"] is weight
    del block.norm.bias                                        # delete a parameter
    assert "bias" not in dict(block.norm.named_parameters())
    with pytest.raises(AttributeError, match="no attribute 'bias'"):
        _ = block.norm.bias
    enc.register_buffer("pe", np.zeros((3, 4), np.float32))    # re-register a buffer
    assert float(enc.pe.data.sum()) == 0 and enc._buffers["pe"] is enc.pe
    enc.pe = np.ones((3, 4), np.float32)                       # assign to a buffer
    assert float(enc.pe.data.sum()) == 12 and enc._buffers["pe"] is enc.pe
    with pytest.raises(TypeError, match="submodule 'drop'"):
        enc.drop = 0.5
    del enc.drop                                               # delete a module, then reuse the name
    enc.drop = 0.5
    assert enc.drop == 0.5 and "drop" not in enc._modules
    with pytest.raises(KeyError, match="already exists"):
        enc.register_buffer("layers", np.zeros(1))
    seq = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())   # containers renumber their children
    del seq[0]
    assert [type(getattr(seq, k)).__name__ for k in ("0", "1")] == ["Tanh", "Sigmoid"]
    assert not hasattr(seq, "2")
    seq.insert(0, nn.GELU())
    seq[2] = nn.ReLU()
    assert [type(getattr(seq, k)).__name__ for k in ("0", "1", "2")] == ["GELU", "Tanh", "ReLU"]
