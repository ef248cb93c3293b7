"""An MLP trained with tinygrad_lite.nn and tinygrad_lite.optim: the article's "walking down the hill".

Three tasks:
  digits    the 8×8 handwritten digits from scikit-learn (1,797 images, offline), an MLP 64-128-10
            trained with minibatches; prints test accuracy and the confusion matrix and saves the
            loss curve (and the confusion matrix as a picture).
  spirals   three interleaved 2-D spirals; saves the learned decision boundary.
  --lr-sweep  trains the digits MLP with plain SGD at a too-small, a good and a too-large learning
            rate and draws the three loss curves on one figure: too small crawls downhill, too
            large overshoots the valley.

    python3 examples/mlp.py [--task digits|spirals] [--optimizer sgd|momentum|adam] [--lr LR]
                            [--epochs N] [--seed S] [--out DIR] [--lr-sweep]

If the loss stops being a finite number the run stops, naming the step, and suggests a lower --lr.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from tqdm import tqdm

import tinygrad_lite as tl
from tinygrad_lite import Tensor, nn, optim
from tinygrad_lite.nn import functional as F

OPTIMIZERS = ("sgd", "momentum", "adam")
DEFAULT_LR = {"sgd": 0.1, "momentum": 0.02, "adam": 1e-3}
DEFAULT_EPOCHS = {"digits": 30, "spirals": 150}
SWEEP_LRS = (0.005, 0.3, 2.5)  # too small, good, too large for plain SGD on the digits


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite: the steps overshoot the valley."""

    def __init__(self, step: int, epoch: int, loss: float, lr: float):
        self.step, self.epoch, self.loss, self.lr = step, epoch, loss, lr
        super().__init__(f"loss became {loss} at step {step} (epoch {epoch}) with lr={lr:g}; "
                         f"try a lower --lr (e.g. {lr / 10:g})")


def make_optimizer(name: str, params, lr: float | None):
    """'sgd' (plain), 'momentum' (SGD with momentum 0.9) or 'adam'; lr None picks a good default."""
    if name not in OPTIMIZERS:
        raise ValueError(f"make_optimizer: optimizer must be one of {OPTIMIZERS}, got {name!r}")
    lr = DEFAULT_LR[name] if lr is None else lr
    if name == "adam":
        return optim.Adam(params, lr=lr)
    return optim.SGD(params, lr=lr, momentum=0.9 if name == "momentum" else 0.0)


def fit(model, X: np.ndarray, y: np.ndarray, opt, epochs: int, batch_size: int, seed: int,
        progress: bool = False, desc: str = "train", stop_on_divergence: bool = True) -> dict:
    """Minibatch training on cross-entropy. Returns per-step and per-epoch mean losses; with
    stop_on_divergence=False a non-finite loss ends the run quietly (the lr sweep wants the curve)."""
    order_rng = np.random.default_rng(seed)
    n = len(X)
    step_losses, epoch_losses = [], []
    model.train()
    bar = tqdm(range(1, epochs + 1), desc=desc, disable=not progress, leave=False, unit="epoch")
    with np.errstate(over="ignore", invalid="ignore"):
        for epoch in bar:
            order = order_rng.permutation(n)
            total = 0.0
            for start in range(0, n, batch_size):
                batch = order[start:start + batch_size]
                loss = F.cross_entropy(model(Tensor(X[batch])), y[batch])
                value = loss.item()
                step_losses.append(value)
                if not np.isfinite(value):
                    if stop_on_divergence:
                        raise TrainingDiverged(len(step_losses), epoch, value, opt.param_groups[0]["lr"])
                    epoch_losses.append(value)
                    return {"losses": step_losses, "epoch_losses": epoch_losses, "diverged": True}
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += value * len(batch)
            epoch_losses.append(total / n)
            bar.set_postfix(loss=f"{epoch_losses[-1]:.4f}")
    return {"losses": step_losses, "epoch_losses": epoch_losses, "diverged": False}


def predict(model, X: np.ndarray) -> np.ndarray:
    model.eval()
    with tl.no_grad(), np.errstate(over="ignore", invalid="ignore"):
        return model(Tensor(X.astype(np.float32))).data.argmax(axis=-1)


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, classes: int) -> np.ndarray:
    """cm[i, j] = how many examples of true class i were predicted as j."""
    cm = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(cm, (y_true, y_pred), 1)
    return cm


def format_confusion(cm: np.ndarray) -> str:
    width = max(3, len(str(cm.max())) + 1)
    head = "true\\pred" + "".join(f"{j:>{width}}" for j in range(len(cm)))
    rows = [f"{i:>9}" + "".join(f"{v:>{width}}" for v in row) for i, row in enumerate(cm)]
    return "\n".join([head] + rows)


# ---------------------------------------------------------------- digits
def load_digits_split(seed: int = 0, test_fraction: float = 0.2):
    """The 8×8 digits, shuffled with `seed` and split; pixels standardised with the train set's
    mean and std (so every input feature starts on the same scale)."""
    from sklearn.datasets import load_digits

    data = load_digits()
    X, y = data.data.astype(np.float32), data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(X))
    n_test = round(len(X) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    mean, std = X[train].mean(axis=0), X[train].std(axis=0) + 1.0
    X = (X - mean) / std
    return X[train], X[test], y[train], y[test]


def train_digits(optimizer: str = "adam", lr: float | None = None, epochs: int = DEFAULT_EPOCHS["digits"],
                 seed: int = 0, batch_size: int = 32, hidden: int = 128, progress: bool = False,
                 stop_on_divergence: bool = True) -> dict:
    """Train MLP([64, hidden, 10]) on the digits; returns acc (test accuracy), losses (per step),
    epoch_losses, confusion (10×10 on the test set), lr, seconds and the model."""
    started = time.perf_counter()
    X_train, X_test, y_train, y_test = load_digits_split(seed)
    tl.manual_seed(seed)
    model = nn.MLP([64, hidden, 10])
    opt = make_optimizer(optimizer, model.parameters(), lr)
    history = fit(model, X_train, y_train, opt, epochs, batch_size, seed, progress, f"digits/{optimizer}",
                  stop_on_divergence)
    y_pred = predict(model, X_test)
    return dict(acc=float((y_pred == y_test).mean()), confusion=confusion_matrix(y_test, y_pred, 10),
                lr=opt.param_groups[0]["lr"], seconds=time.perf_counter() - started, model=model, **history)


def lr_sweep(lrs=SWEEP_LRS, optimizer: str = "sgd", epochs: int = 15, seed: int = 0,
             progress: bool = False) -> dict:
    """lr -> the digits run's result, for a too-small, a good and a too-large learning rate."""
    return {lr: train_digits(optimizer, lr, epochs, seed, progress=progress, stop_on_divergence=False)
            for lr in lrs}


# ---------------------------------------------------------------- spirals
def make_spirals(points_per_class: int = 100, classes: int = 3, noise: float = 0.2, seed: int = 0):
    """Interleaved 2-D spirals, one arm per class (the classic non-linearly-separable toy)."""
    g = np.random.default_rng(seed)
    radius = np.tile(np.linspace(0.05, 1.0, points_per_class), classes)
    label = np.repeat(np.arange(classes), points_per_class)
    angle = label * (2 * np.pi / classes) + radius * 4 + g.standard_normal(len(radius)) * noise
    X = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1).astype(np.float32)
    return X, label.astype(np.int64)


def train_spirals(optimizer: str = "adam", lr: float | None = None, epochs: int = DEFAULT_EPOCHS["spirals"],
                  seed: int = 0, progress: bool = False) -> dict:
    """Train MLP([2, 64, 64, 3]) on the spirals; returns acc (training accuracy), losses, model, X, y."""
    X, y = make_spirals(seed=seed)
    tl.manual_seed(seed)
    model = nn.MLP([2, 64, 64, 3])
    lr = lr if lr is not None else (1e-2 if optimizer == "adam" else None)
    opt = make_optimizer(optimizer, model.parameters(), lr)
    history = fit(model, X, y, opt, epochs, 32, seed, progress, f"spirals/{optimizer}")
    return dict(acc=float((predict(model, X) == y).mean()), model=model, X=X, y=y, **history)


# ---------------------------------------------------------------- figures
def _plots():
    from viz import plots
    return plots


def save_loss_curve(losses, path: str, title: str):
    return _plots().plot_loss_curves({"train loss (per minibatch)": losses}, out=path, title=title, logy=True)


def save_sweep(results: dict, path: str):
    """One curve per learning rate (mean train loss per epoch); the default sweep's curves are
    labelled too small / good / too large."""
    verdicts = ("too small", "good", "too large") if tuple(results) == SWEEP_LRS else ("",) * len(results)
    names = {lr: f"lr={lr:g}" + (f" ({verdict})" if verdict else "") for lr, verdict in zip(results, verdicts)}
    epochs = max(len(r["epoch_losses"]) for r in results.values())
    records = [{"epoch": e + 1, **{names[lr]: r["epoch_losses"][e] for lr, r in results.items()
                                   if e < len(r["epoch_losses"]) and np.isfinite(r["epoch_losses"][e])}}
               for e in range(epochs)]
    return _plots().plot_loss_curves(records, out=path, keys=list(names.values()), x_key="epoch", logy=True,
                                     ylabel="mean train loss", title="walking down the hill: the learning rate")


def save_decision_boundary(model, X, y, path: str):
    return _plots().plot_decision_boundary(lambda grid: predict(model, grid), X, y, out=path,
                                           title="MLP decision regions on the spirals")


# ---------------------------------------------------------------- command line
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("digits", "spirals"), default="digits")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default: per optimizer)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join("out", "mlp"), help="directory for the figures")
    parser.add_argument("--lr-sweep", action="store_true", help="plot too-small, good and too-large lr")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    try:
        if args.lr_sweep:
            results = lr_sweep(epochs=args.epochs or 15, seed=args.seed, progress=True)
            for lr, r in results.items():
                state = "diverged" if r["diverged"] else f"final loss {r['epoch_losses'][-1]:.4f}"
                print(f"lr={lr:<6g} test accuracy {r['acc']:.3f}  {state}")
            print(f"saved {save_sweep(results, os.path.join(args.out, 'lr_sweep.png')).path}")
        elif args.task == "digits":
            r = train_digits(args.optimizer, args.lr, args.epochs or DEFAULT_EPOCHS["digits"], args.seed,
                             progress=True)
            print(f"digits: {args.optimizer} lr={r['lr']:g}, {len(r['epoch_losses'])} epochs in "
                  f"{r['seconds']:.1f} s: test accuracy {r['acc']:.4f}")
            print("confusion matrix (rows: true digit, columns: predicted):")
            print(format_confusion(r["confusion"]))
            curve = save_loss_curve(r["losses"], os.path.join(args.out, "digits_loss.png"),
                                    f"digits, {args.optimizer} lr={r['lr']:g}")
            cm = _plots().plot_confusion_matrix(r["confusion"], [str(i) for i in range(10)],
                                                out=os.path.join(args.out, "digits_confusion.png"))
            print(f"saved {curve.path} and {cm.path}")
        else:
            r = train_spirals(args.optimizer, args.lr, args.epochs or DEFAULT_EPOCHS["spirals"], args.seed,
                              progress=True)
            print(f"spirals: training accuracy {r['acc']:.3f}")
            boundary = save_decision_boundary(r["model"], r["X"], r["y"],
                                              os.path.join(args.out, "spirals_boundary.png"))
            curve = save_loss_curve(r["losses"], os.path.join(args.out, "spirals_loss.png"), "spirals")
            print(f"saved {boundary.path} and {curve.path}")
    except TrainingDiverged as e:
        print(f"mlp.py: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        if e.name != "sklearn":
            raise
        print('mlp.py: the digits need scikit-learn, one of the examples\' extras: python3 -m pip install '
              '-e ".[examples]" (or run --task spirals, which needs nothing more)', file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
