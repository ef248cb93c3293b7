"""Optimizer: the base class holding parameter groups and per-parameter state (PyTorch's layout).

An optimizer updates `p.data` in place with NumPy, in the parameter's own dtype; a parameter
whose `grad` is None (it took no part in the loss) is skipped.
"""
from __future__ import annotations

import numpy as np

from ..autograd import recorded
from ..checks import number
from ..tensor import Tensor


class Optimizer:
    """params: an iterable of Parameters, or of dicts {'params': [...], <hyperparameter>: value}
    that override `defaults` for that group. `param_groups[i]['lr']` may be set at any time."""

    def __init__(self, params, defaults: dict):
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Parameters or dicts, "
                            "got a single Tensor (wrap it in a list)")
        self.defaults = dict(defaults)
        self.state: dict = {}
        self.param_groups: list[dict] = []
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict) -> None:
        """Adds a group {'params': [...], <hyperparameter>: value} whose values override the
        defaults, like torch.optim.Optimizer.add_param_group."""
        name = type(self).__name__
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"{name}: a parameter group must be a dict with a 'params' entry, got {group!r:.80}")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: can only optimize Tensors/Parameters, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor (made by op '{p._op}')")
        if not params:
            raise ValueError(f"{name}: optimizer got an empty parameter list")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params) or any(id(p) in seen for p in params):
            raise ValueError(f"{name}: some parameters appear more than once (in one group or across groups)")
        unknown = set(group) - set(self.defaults) - {"params", "initial_lr"}
        if unknown:
            raise ValueError(f"{name}: unknown hyperparameter(s) {sorted(unknown)}; expected {sorted(self.defaults)}")
        full = {**self.defaults, **group, "params": params}
        self._validate(full)
        self.param_groups.append(full)

    def _validate(self, group: dict) -> None:
        number(type(self).__name__, "learning rate lr", group["lr"], 0.0)

    @recorded
    def zero_grad(self) -> None:
        """Set every parameter's grad to None (PyTorch's default set_to_none=True)."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def step(self) -> None:
        """Updates every parameter that has a grad, in place; each optimizer defines it."""
        raise NotImplementedError

    # ------------------------------------------------------------ state

    def state_dict(self) -> dict:
        """{'state': {index: {name: ndarray | number}}, 'param_groups': [{hyperparameters, 'params': [index]}]}.
        Only JSON-able values and ndarrays (copies), so it fits a safetensors checkpoint."""
        index, groups = {}, []
        for group in self.param_groups:
            packed = {k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                           for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore hyperparameters and state saved by state_dict() (index keys may be ints or strings)."""
        name = type(self).__name__
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        if groups is None or "state" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected a dict with 'state' and 'param_groups'")
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: saved state has {len(groups)} parameter groups, "
                             f"this optimizer has {len(self.param_groups)}")
        params = []
        for i, (saved, own) in enumerate(zip(groups, self.param_groups)):
            if len(saved["params"]) != len(own["params"]):
                raise ValueError(f"{name}.load_state_dict: group {i} has {len(saved['params'])} saved parameters, "
                                 f"this optimizer has {len(own['params'])}")
            params.extend(zip(saved["params"], own["params"]))
        new_state = {}
        for key, p in params:
            entry = state_dict["state"].get(key, state_dict["state"].get(str(key)))
            if entry is None:
                continue
            restored = {}
            for k, v in entry.items():
                if isinstance(v, np.ndarray):
                    if v.shape == p.shape:
                        v = np.array(v, dtype=p.dtype, copy=True)
                    elif v.ndim == 0:
                        v = v.item()
                    else:
                        raise ValueError(f"{name}.load_state_dict: state '{k}' of parameter {key} has shape "
                                         f"{v.shape}, the parameter has shape {p.shape}")
                restored[k] = v
            new_state[p] = restored
        for saved, own in zip(groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    own[k] = tuple(v) if isinstance(self.defaults.get(k), tuple) else v
        self.state = new_state

    def __repr__(self):
        """The optimizer's name and each param group's hyperparameters, as torch prints them."""
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines + [")"])
