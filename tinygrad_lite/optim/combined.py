"""Several optimizers stepped as one: Muon for a network's matrices beside AdamW for the rest
(Jordan et al., 2024) is the usual pair. One object to step, zero and checkpoint."""
from __future__ import annotations

from ..autograd import recorded
from .optimizer import Optimizer


class CombinedOptimizer:
    """CombinedOptimizer(Muon(matrices), AdamW(others)): step() and zero_grad() go to each in turn;
    param_groups lists all their groups (each keeps its own lr); state_dict() holds each one's."""

    def __init__(self, *optimizers: Optimizer):
        if not optimizers or not all(isinstance(o, Optimizer) for o in optimizers):
            raise TypeError("CombinedOptimizer: expected one or more optimizers, got "
                            f"{[type(o).__name__ for o in optimizers]}")
        seen = set()
        for o in optimizers:
            ids = {id(p) for g in o.param_groups for p in g["params"]}
            if ids & seen:
                raise ValueError("CombinedOptimizer: a parameter belongs to more than one of the optimizers")
            seen |= ids
        self.optimizers = list(optimizers)

    @property
    def param_groups(self) -> list[dict]:
        return [g for o in self.optimizers for g in o.param_groups]

    @recorded
    def step(self) -> None:
        for o in self.optimizers:
            o.step()

    @recorded
    def zero_grad(self) -> None:
        for o in self.optimizers:
            o.zero_grad()

    def state_dict(self) -> dict:
        return {"optimizers": [{"type": type(o).__name__, **o.state_dict()} for o in self.optimizers]}

    def load_state_dict(self, state_dict: dict) -> None:
        saved = state_dict.get("optimizers") if isinstance(state_dict, dict) else None
        kinds = [type(o).__name__ for o in self.optimizers]
        if not isinstance(saved, list) or [s.get("type") for s in saved] != kinds:
            got = None if not isinstance(saved, list) else [s.get("type") for s in saved]
            raise ValueError(f"CombinedOptimizer.load_state_dict: saved optimizers {got}, this one holds {kinds}")
        for o, s in zip(self.optimizers, saved):
            o.load_state_dict({k: v for k, v in s.items() if k != "type"})

    def __repr__(self):
        return "CombinedOptimizer(\n" + "\n".join(repr(o) for o in self.optimizers) + "\n)"
