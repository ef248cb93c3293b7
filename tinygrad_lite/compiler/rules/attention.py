"""Rule attention: multi-head scaled dot-product attention, split heads to merged heads, as one op."""
from __future__ import annotations

import math

import numpy as np

from ...nn.fused import fused_attention_op
from ...ops.binary import div_op, matmul_op
from ...ops.movement import reshape_op, transpose_op
from ...ops.nn import dropout_op, softmax_op
from .pattern import Fused, producer


class Attention:
    """The plain multi-head attention (transformer/attention.py: split heads, q·kᵀ / c, masked softmax,
    dropout, @ v, merge heads) -> nn.fused.fused_attention_op with heads=h: all heads in one op on
    q, k, v as the projections give them (B, T, h·d), no head copies, no scores kept but the weights.

    Matches, for q, k, v of shape (B, T, h·d): q.reshape(B, T_q, h, d).transpose(1, 2) @
    k.reshape(B, T_k, h, d).transpose(1, 2).transpose(2, 3), divided by c (a constant tensor of one
    element: the plan checks its value at each replay), softmax over the last dim (a mask or none),
    dropout (training) or none (eval), @ v.reshape(B, T_k, h, d_v).transpose(1, 2), .transpose(1, 2)
    .reshape(B, T_q, h·d_v). Emits: fused_attention_op(q, k, v, mask, p, training, scale, h, needs,
    None): scale = softmax's scale / c; its keep mask (B, h, T_q, T_k) is one draw from the same
    stream at the same point, so the masks equal the plain chain's. It hands out no weights (the
    plain box's kept weights, `remember(weights.data)`, are then the placeholder: a compiled step
    keeps none).
    Gain: GPT recipe 4-7%, SMALL 2-4%, TINY -5 to +1% (no gain at its small shapes)."""

    name, switch, draws = "attention", "fused_attention", ("dropout",)

    def find(self, records: list) -> list:
        """The groups, by role: the heads of q, k, v (reshape, transpose; k transposed again), the
        scores, the softmax, the dropout if any, the product with v and the merge."""
        groups = []
        for i, r in enumerate(records):
            if r is None or r.fn is not reshape_op or len(r.shape) != 3:
                continue
            roles = _attention(records, i)
            if roles is not None:
                groups.append(roles)
        return groups

    def emit(self, ops: dict) -> Fused | None:
        """The fused op on the heads' sources q, k, v, with the softmax's mask and the dropout's p."""
        q, k, v = (ops[f"{x}_split"].parents[0] for x in "qkv")
        divisor = ops["scaled"].parents[1]
        value = float(np.asarray(divisor.data).reshape(()))
        _, softmax_scale, mask = ops["softmax"].args
        p, training = (ops["dropout"].args[0], True) if "dropout" in ops else (0.0, False)
        heads = ops["q_split"].args[0][2]
        needs = (q.requires_grad, k.requires_grad, v.requires_grad)
        return Fused(fused_attention_op, "fused_attention", (q, k, v),
                     (mask, p, training, softmax_scale / value, heads, needs, None),
                     assumed=((divisor, divisor.data.copy()),))


def _attention(records: list, merged: int) -> dict | None:
    """The roles of the attention whose merge of heads is op `merged` (a reshape), or None."""
    roles = {"merged": merged}
    roles["unheaded"] = _transposed(records, merged, (1, 2))
    roles["mixed"] = _made(records, roles["unheaded"], 0, matmul_op)
    dropped = _made(records, roles["mixed"], 0, dropout_op)
    if dropped is not None:
        roles["dropout"] = dropped
    roles["softmax"] = _made(records, roles["mixed"] if dropped is None else dropped, 0, softmax_op)
    roles["scaled"] = _made(records, roles["softmax"], 0, div_op)
    roles["scores"] = _made(records, roles["scaled"], 0, matmul_op)
    roles["k_transposed"] = _transposed(records, roles["scores"], (2, 3), slot=1)
    if None in roles.values():
        return None
    for x, (matmul, slot) in {"q": (roles["scores"], 0), "k": (roles["k_transposed"], 0),
                              "v": (roles["mixed"], 1)}.items():
        roles[f"{x}_heads"] = _transposed(records, matmul, (1, 2), slot)
        roles[f"{x}_split"] = _made(records, roles[f"{x}_heads"], 0, reshape_op)
        if roles[f"{x}_split"] is None:
            return None
    return roles if _fits(records, roles) else None


def _made(records: list, i: int | None, slot: int, fn) -> int | None:
    return None if i is None else producer(records, i, slot, fn)


def _transposed(records: list, i: int | None, dims: tuple, slot: int = 0) -> int | None:
    j = _made(records, i, slot, transpose_op)
    return j if j is not None and tuple(records[j].args) == dims else None


def _fits(records: list, roles: dict) -> bool:
    """Whether the shapes are those of heads split and merged, the softmax is over the keys with its
    scale a number, and the divisor a constant of one element that is not 0."""
    shapes = {x: records[roles[f"{x}_split"]].shape for x in "qkv"}
    if any(len(shape) != 4 for shape in shapes.values()):
        return False
    sources = {x: _source_shape(records, roles[f"{x}_split"]) for x in "qkv"}
    (B, T_q, h, d), (Bk, T_k, hk, dk), (Bv, T_v, hv, d_v) = shapes["q"], shapes["k"], shapes["v"]
    if (B, h, d) != (Bk, hk, dk) or (B, T_k, h) != (Bv, T_v, hv):
        return False
    if any(sources[x] != shapes[x][:2] + (shapes[x][2] * shapes[x][3],) for x in "qkv"):
        return False
    if records[roles["merged"]].shape != (B, T_q, h * d_v):
        return False
    dim, scale, _ = records[roles["softmax"]].args
    divisor = records[roles["scaled"]].leaves[1]
    return dim == 3 and isinstance(scale, (int, float)) and _is_constant(divisor)


def _source_shape(records: list, split: int) -> tuple | None:
    j, leaf = records[split].parents[0], records[split].leaves[0]
    return tuple(records[j].shape) if j is not None else getattr(leaf, "shape", None)


def _is_constant(t) -> bool:
    """A tensor of one element, needing no gradient, whose value is known now and is a finite non-zero."""
    data = getattr(t, "data", None)
    if not isinstance(data, np.ndarray) or data.size != 1 or t.requires_grad or data.dtype.kind != "f":
        return False
    value = float(data.reshape(()))
    return value != 0 and math.isfinite(value)
