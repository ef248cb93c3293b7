# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2 · The Tensor engine, and an MLP on handwritten digits
#
# `tinygrad_lite.Tensor` is the same idea as `Value` one floor up: each op works on a whole NumPy
# array, records its inputs, and knows its backward rule. Names and arguments follow PyTorch
# (`sum(dim=, keepdim=)`, `softmax(-1)`, `nn.Linear`, `optim.Adam`).
#
# The second half trains `examples/mlp.py`'s MLP on scikit-learn's 8×8 digits (shipped with
# scikit-learn, no download) and draws the loss curve and the confusion matrix inline. It needs
# the `examples` extra, which the `notebooks` extra includes.

# %%
# %matplotlib inline
import math
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

import tinygrad_lite as tl
from tinygrad_lite import Tensor, Value
from tinygrad_lite.nn import functional as F
from viz import draw_graph, plots

EXAMPLES = Path(tl.__file__).resolve().parents[1] / "examples"
if not (EXAMPLES / "mlp.py").is_file():
    raise FileNotFoundError(f"no examples/mlp.py next to {Path(tl.__file__).parent}; open the notebooks "
                            "from a clone installed with `pip install -e '.[notebooks]'`")
sys.path.insert(0, str(EXAMPLES))
import mlp  # noqa: E402  examples/mlp.py: the digits data, training loop and confusion matrix


def show_file(write):
    """Display the PNG that write(out) saves (examples/mlp.py's sweep plot writes a file),
    from a temporary directory that is removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        result = write(Path(tmp) / "figure.png")
        display(Image(data=Path(result.path).read_bytes(), format="png"))
    return result


# %% [markdown]
# ## Broadcasting, and gradients that come back in the input's shape
#
# `x` is a (2, 3) batch, `w` a (3,) row of weights and `b` one number. `x * w` broadcasts `w` over
# the rows, `+ b` broadcasts `b` everywhere. Backward sums each gradient over the axes that were
# broadcast, so `w.grad` has `w`'s shape (3,) and `b.grad` is a single number.

# %%
x = Tensor(np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]]), requires_grad=True, name="x")
w = Tensor(np.array([1.0, 2.0, -1.0]), requires_grad=True, name="w")
b = Tensor(np.array(0.5), requires_grad=True, name="b")
y = ((x * w).tanh() + b).sum()
y.backward()
print("y =", round(y.item(), 6), "| dtype", y.dtype)
print("x.grad", x.grad.shape, "\n", x.grad.round(4))
print("w.grad", w.grad.shape, w.grad.round(4), "| b.grad", b.grad)

# %% [markdown]
# The scalar engine of notebook 1 computes the same numbers one Value at a time:

# %%
xs = [[Value(v) for v in row] for row in x.data]
ws = [Value(v) for v in w.data]
bs = Value(float(b.data))
y_scalar = sum(((xi * wi).tanh() + bs for row in xs for xi, wi in zip(row, ws)), Value(0.0))
y_scalar.backward()
assert math.isclose(y_scalar.data, y.item(), rel_tol=1e-12)
np.testing.assert_allclose([[v.grad for v in row] for row in xs], x.grad, rtol=1e-12)
np.testing.assert_allclose([v.grad for v in ws], w.grad, rtol=1e-12)
print("Value and Tensor agree on y and on every gradient")

# %% [markdown]
# The Tensor graph has one node per array op (with its shape), not one per number:

# %%
draw_graph(y)

# %% [markdown]
# `gradcheck` compares backward with central finite differences (in float64, where finite
# differences are accurate enough to mean something). The test suite runs it on every op.

# %%
print("gradcheck:", tl.gradcheck(lambda x, w, b: ((x * w).tanh() + b).sum(), x, w, b))

# %% [markdown]
# ## An MLP on the 8×8 digits
#
# `mlp.load_digits_split` shuffles the 1,797 images, keeps 20% as a test set and standardises each
# pixel with the training set's mean and spread. A few training images:

# %%
X_train, X_test, y_train, y_test = mlp.load_digits_split(seed=0)
print(f"train {X_train.shape}, test {X_test.shape}")
fig, axes = plt.subplots(1, 8, figsize=(8, 1.4))
for ax, image, label in zip(axes, X_train, y_train):
    ax.imshow(image.reshape(8, 8), cmap="gray_r")
    ax.set_title(str(label))
    ax.axis("off")
plt.show()

# %% [markdown]
# `mlp.train_digits` builds `nn.MLP([64, 128, 10])`, trains it with Adam on minibatches of 32
# under cross-entropy and returns the losses, the test accuracy and the confusion matrix.

# %%
run = mlp.train_digits("adam", epochs=30, seed=0)
print(f"{len(run['epoch_losses'])} epochs, {len(run['losses'])} steps in {run['seconds']:.1f} s: "
      f"test accuracy {run['acc']:.3f}")
assert run["epoch_losses"][-1] < run["epoch_losses"][0] / 10
display(plots.plot_loss_curves({"train loss (per minibatch)": run["losses"]}, logy=True,
                                title="digits: MLP 64-128-10, Adam"));

# %% [markdown]
# Rows are the true digit, columns the prediction, so everything off the diagonal is a mistake.

# %%
confusion = run["confusion"]
assert confusion.sum() == len(y_test) and np.trace(confusion) == round(run["acc"] * len(y_test))
display(plots.plot_confusion_matrix(confusion, [str(d) for d in range(10)],
                                    title=f"digits test set: accuracy {run['acc']:.3f}"))
off_diagonal = confusion - np.diag(np.diag(confusion))
pairs = sorted(((int(n), t, p) for (t, p), n in np.ndenumerate(off_diagonal) if n), reverse=True)
print("most frequent mistakes (count, true, predicted):", pairs[:5])

# %% [markdown]
# The test images the model got wrong, with what it said:

# %%
predicted = mlp.predict(run["model"], X_test)
wrong = np.flatnonzero(predicted != y_test)[:8]
if len(wrong):
    fig, axes = plt.subplots(1, len(wrong), figsize=(1.1 * len(wrong), 1.6), squeeze=False)
    for ax, i in zip(axes[0], wrong):
        ax.imshow(X_test[i].reshape(8, 8), cmap="gray_r")
        ax.set_title(f"{y_test[i]}→{predicted[i]}", color="tab:red")
        ax.axis("off")
    plt.show()

# %% [markdown]
# ## Walking down the hill: the learning rate
#
# Plain SGD at a too small, a good and a too large learning rate (`mlp.lr_sweep`): too small
# crawls, too large overshoots the valley and the loss grows instead of falling (were it to stop
# being a finite number, the run would end there and its curve with it).

# %%
sweep = mlp.lr_sweep(epochs=15, seed=0)
for lr, result in sweep.items():
    state = "diverged" if result["diverged"] else f"final loss {result['epoch_losses'][-1]:.3f}"
    print(f"lr={lr:<6g} test accuracy {result['acc']:.3f}  {state}")
show_file(lambda out: mlp.save_sweep(sweep, out));

# %% [markdown]
# ## The backprop graph of one training step
#
# One minibatch through the trained model, cross-entropy, `backward()`. With `model=` the ops sit
# in clusters named by module path, and parameters carry their names (`layers.0.weight`, ...).
# Colours show gradient norms on a log scale, blue (small) to red (large).

# %%
model = run["model"]
model.train()
with tl.retain_grads():
    loss = F.cross_entropy(model(Tensor(X_train[:32])), y_train[:32])
    model.zero_grad()
    loss.backward()
draw_graph(loss, model=model)
