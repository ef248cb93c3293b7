"""Learning-rate schedules (PyTorch's `torch.optim.lr_scheduler` names), plus the paper's NoamLR.

Use: call `scheduler.step()` once after each `optimizer.step()`. Each schedule is computed in
closed form from `last_epoch` (the number of scheduler steps taken), so it can be resumed from
`state_dict()` exactly.
"""
from __future__ import annotations

import math

from ..autograd import recorded
from ..checks import number, positive_int
from .optimizer import Optimizer


class LRScheduler:
    """Sets every param group's lr to `get_lr()` on each step(). Construction takes the first step
    (last_epoch goes from -1 to 0), as in PyTorch."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        elif any("initial_lr" not in g for g in optimizer.param_groups):
            raise ValueError(f"{type(self).__name__}: resuming with last_epoch={last_epoch} needs 'initial_lr' "
                             "in every param group (load the optimizer's state_dict first)")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self) -> list[float]:
        """The lr of each param group at `last_epoch`; each schedule defines it."""
        raise NotImplementedError

    @recorded
    def step(self) -> None:
        """Advances `last_epoch` by one and sets each param group's lr; call it after
        optimizer.step()."""
        self.last_epoch += 1
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """The lr of each param group as set by the last step(), like torch's get_last_lr()."""
        return list(self._last_lr)

    def state_dict(self) -> dict:
        """Every attribute except the optimizer and callables (JSON-able)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)
                and not (isinstance(v, list) and any(callable(x) for x in v))}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores the attributes saved by state_dict() (resume where it stopped)."""
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """lr = base_lr · gamma^(last_epoch // step_size)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size = positive_int("StepLR", "step_size", step_size)
        self.gamma = number("StepLR", "gamma", gamma, 0.0)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """base_lr · gamma^(last_epoch // step_size) for each param group."""
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr − eta_min)·(1 + cos(π·last_epoch / T_max)) / 2 (SGDR without restarts)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max = positive_int("CosineAnnealingLR", "T_max", T_max)
        self.eta_min = number("CosineAnnealingLR", "eta_min", eta_min, 0.0)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """eta_min + (base_lr − eta_min)·(1 + cos(π·last_epoch / T_max)) / 2 for each param
        group."""
        cosine = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """lr = base_lr · lr_lambda(last_epoch); one function, or one per param group."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1):
        n = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(lambdas) != n or not all(callable(f) for f in lambdas):
            raise ValueError(f"LambdaLR: expected one callable or {n} callables (one per param group), "
                             f"got {lr_lambda!r}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """base_lr · lr_lambda(last_epoch) for each param group."""
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]


class NoamLR(LRScheduler):
    """The paper's schedule (§5.3, eq. 3): linear warm-up, then decay ∝ 1/sqrt(step):

        lr = base_lr · d_model^−0.5 · min(step^−0.5, step · warmup^−1.5)

    The optimizer's `lr` MULTIPLIES the formula, so lr=1.0 gives exactly the paper's schedule
    (which peaks at step = warmup with d_model^−0.5 · warmup^−0.5, ≈ 7e-4 for d_model=512,
    warmup=4000). `step` counts from 1: the paper's formula divides by zero at step 0, so the
    construction step uses step 1 and the n-th optimizer step runs with lr(step=n).
    """

    def __init__(self, optimizer: Optimizer, d_model: int, warmup: int = 4000, last_epoch: int = -1):
        self.d_model = positive_int("NoamLR", "d_model", d_model)
        self.warmup = positive_int("NoamLR", "warmup", warmup)
        super().__init__(optimizer, last_epoch)

    def factor(self, step: int) -> float:
        """The paper's multiplier at `step` (from 1): d_model^−0.5 · min(step^−0.5, step ·
        warmup^−1.5)."""
        return self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)

    def get_lr(self):
        """base_lr · factor(last_epoch + 1) for each param group."""
        f = self.factor(self.last_epoch + 1)
        return [base * f for base in self.base_lrs]
