"""Rule skip_padding: a padded batch's position-wise ops on the rows that matter only.

Most of a Transformer step is position-wise (paper §3.3: "applied to each position separately and
identically"): embeddings, projections, FFNs, norms, dropout and the generator compute each row of a
(B, T, ...) tensor from the same row of their inputs. Attention alone mixes rows, and a row that its
mask hides from every query (a <pad> key) adds exactly nothing; the loss ignores a row whose target is
ignore_index. A row that is neither a visible key nor a counted target cannot move the loss, so a
compiled step runs the position-wise ops on the other rows only, (n, ...), and attention among them
(nn.fused.fused_attention_rows_op): the same loss and gradients, the pad rows' share of the work saved.

Matches: a region that starts at embeddings of a step's 2-D id inputs (B, T) (each a "space" of rows),
runs through position-wise ops, fused attention (rule attention) whose mask is a bool array, and reshapes
that keep the rows, and ends in cross-entropy with mean or sum reduction, every region tensor read by
such ops only. A space keeps the rows its masks show to some query or whose target counts
(kept_rows); the plan finds them from its inputs at each replay. Emits: each op at the kept rows; dropout
draws the padded mask's words at those rows only (keep_at_rows), so the masks equal the plain step's
wherever both draw, and a compiled step needs no right-padded batch nor any branch in the model.
Gain: see bench/README.md, "Step compiler"."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...nn.functional import cross_entropy_op, embedding_op, linear_op
from ...nn.fused import (
    add_dropout_op,
    add_keep_op,
    fused_attention_op,
    fused_attention_rows_op,
    linear_relu_dropout_op,
    linear_relu_keep_op,
)
from ...ops import unary
from ...ops.binary import add_op, div_op, mul_op, sub_op
from ...ops.movement import reshape_op
from ...ops.nn import dropout_op, keep_lanes, keep_rows_from_seed, layer_norm_op
from ...random import rng
from ..traced import Input, plain

BINARY = (add_op, sub_op, mul_op, div_op)
ELEMENTWISE = tuple(getattr(unary, name) for name in dir(unary) if name.endswith("_op"))


@dataclass
class Space:
    """The rows of one padded grid of tokens (B, T): an embedding of a step's ids starts it."""
    ids: np.ndarray
    kept: np.ndarray = None
    masks: list = field(default_factory=list)    # op indices of the attentions whose keys are its rows
    losses: list = field(default_factory=list)   # op indices of the cross-entropies on its rows


@dataclass
class Rows:
    """What skip_padding found in a capture's records: the spaces, and each region op's
    (kind, space, lead dims of its region input)."""
    spaces: list
    ops: dict
    shapes: dict  # op index -> the padded shape of its output (what the step's Python sees)


class SkipPadding:
    """The rule (see the module docstring); find() reads a capture's records, fused groups already ops."""

    name, switch = "skip_padding", "skip_padding"

    def find(self, records: list) -> Rows | None:
        spaces, where, ops = [], {}, {}   # where: op index -> (space, lead dims) of its region output
        for i, r in enumerate(records):
            if r is None:
                continue
            inside = [(slot, j) for slot, j in enumerate(r.parents) if j in where]
            if not inside:
                if r.fn is embedding_op and isinstance(r.args[0], Input) and r.args[0].ndim == 2:
                    spaces.append(Space(r.args[0].array))
                    where[i], ops[i] = (len(spaces) - 1, 2), ("entry", len(spaces) - 1, 2)
                continue
            kind = _kind(records, i, r, inside, where, spaces)
            if kind is None:
                return None
            ops[i] = kind
            if kind[0] != "loss":
                where[i] = (kind[1] if kind[0] != "attention" else kind[1][0], 1 if kind[0] == "reshape" else kind[2])
        if not spaces or not _only_read_by_region(records, where, ops):
            return None
        for space in spaces:
            masks = [records[i].args[0] for i in space.masks]
            targets = [(records[i].args[0], records[i].args[2]) for i in space.losses]
            if not all(m is None or _key_mask(m, space.ids.shape) for m in masks):
                return None
            space.kept = kept_rows(space.ids, tuple(plain(m) for m in masks),
                                   tuple((plain(t), ignore) for t, ignore in targets))
        return Rows(spaces, ops, {i: records[i].shape for i in ops})


def _key_mask(mask, lead: tuple) -> bool:
    """A bool mask of at most 4 dims whose batch dim is 1 or B and whose last dim is the keys' T."""
    shape = (1,) * (4 - len(mask.shape)) + tuple(mask.shape)
    return (getattr(mask, "dtype", None) == np.bool_ and len(mask.shape) <= 4 and shape[0] in (1, lead[0])
            and shape[3] == lead[1])


def _kind(records, i, r, inside, where, spaces) -> tuple | None:
    """(kind, space, lead dims of the region input) of op i that reads region tensors, or None."""
    (slot, j), *more = inside
    space, lead = where[j]
    if any(where[k][0] != space or records[k].shape != records[j].shape for _, k in more):
        if r.fn is fused_attention_op and slot == 0 and [s for s, _ in more] == [1, 2]:
            return _attention(records, i, r, where, spaces)
        return None
    rows_of = records[j].shape[:lead]
    if r.fn is fused_attention_op:
        return _attention(records, i, r, where, spaces)
    if records[i].shape[:lead] != rows_of and r.fn not in (reshape_op, cross_entropy_op):
        return None
    if r.fn in ELEMENTWISE or (r.fn is linear_op and slot == 0 and not more):
        return ("as_is", space, lead)
    if r.fn is layer_norm_op and slot == 0 and not more and len(r.args[0]) <= len(records[j].shape) - lead:
        return ("as_is", space, lead)  # normalized over trailing dims only
    if r.fn in (dropout_op, linear_relu_dropout_op) and slot == 0:
        return ("drop", space, lead)
    if r.fn is add_dropout_op and len(inside) == 2:
        return ("drop", space, lead)
    if r.fn in BINARY:
        return _binary(records, r, slot, inside, space, lead, rows_of)
    if r.fn is reshape_op and records[i].shape == (math.prod(rows_of),) + records[j].shape[lead:]:
        return ("reshape", space, lead)
    if (r.fn is cross_entropy_op and lead == 1 and len(records[j].shape) == 2 and r.args[4] in ("mean", "sum")
            and isinstance(r.args[0], (Input, np.ndarray))):
        spaces[space].losses.append(i)
        return ("loss", space, lead)
    return None


def _binary(records, r, slot, inside, space, lead, rows_of) -> tuple | None:
    """add, sub, mul or div of two region tensors, or of one and an operand: as it is when the operand
    broadcasts over the trailing dims only, else a constant taken at the rows' positions."""
    if len(inside) == 2:
        return ("as_is", space, lead)
    other = r.parents[1 - slot]
    operand = r.leaves[1 - slot] if other is None else None
    shape = records[other].shape if other is not None else getattr(operand, "shape", None)
    if shape is not None and len(shape) <= len(records[r.parents[slot]].shape) - lead:
        return ("as_is", space, lead)
    if operand is None or getattr(operand, "requires_grad", True):
        return None  # a position-dependent operand that an op makes, or that needs a gradient
    return ("operand", space, lead, slot)


def _attention(records, i, r, where, spaces) -> tuple | None:
    """Fused attention on q of one space and k, v of one (another, or the same) space."""
    q, k, v = r.parents
    if any(x not in where for x in (q, k, v)) or where[k] != where[v] or r.args[4] is None or r.args[6] is not None:
        return None
    if where[q][1] != 2 or where[k][1] != 2:
        return None
    spaces[where[k][0]].masks.append(i)
    return ("attention", (where[q][0], where[k][0]), 2)


def _only_read_by_region(records, outputs, ops) -> bool:
    """Every read of each region output is by an op of the region (not a step output or a recorded call)."""
    reads = dict.fromkeys(outputs, 0)
    for k in ops:
        for j in records[k].parents:
            if j in reads:
                reads[j] += 1
    return all(records[i].uses == n for i, n in reads.items())


def kept_rows(ids: np.ndarray, masks: tuple, targets: tuple) -> np.ndarray:
    """The (B, T) bool grid of the rows a space of token ids (B, T) keeps: a key some query may attend to, in any of the
    attention masks on its keys (bool, broadcasting to (B, h, T_q, T_k)), or a row whose target is not
    ignore_index, in any (targets (B·T,), ignore_index) pair."""
    lead = ids.shape
    kept = np.zeros(lead, dtype=bool)
    for mask in masks:
        if mask is None:
            return np.ones(lead, dtype=bool)
        m = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
        kept |= m.any(axis=(1, 2))
    for t, ignore in targets:
        kept |= np.not_equal(t.reshape(lead), ignore)
    return kept


def keep_at_rows(rows: np.ndarray, width: int, p: float) -> np.ndarray:
    """dropout_keep_mask's entries at rows `rows` of a padded (rows, width) tensor, (len(rows), width) bool:
    one word of the engine's rng, as dropout_keep_mask draws, and only those rows' words computed."""
    bits, threshold = keep_lanes(p)
    seed = rng().bit_generator.random_raw()
    return keep_rows_from_seed(seed, rows, width, bits, threshold)


# ---------------------------------------------------------------- the ops as a plan runs them on rows

def dropout_rows_op(x, p, scale, rows):
    keep = keep_at_rows(rows, x.size // max(len(rows), 1), p).reshape(x.shape)
    return x * keep * scale, lambda g: (g * keep * scale,)


def linear_relu_dropout_rows_op(x, w, b, p, training, needs, rows):
    keep = keep_at_rows(rows, w.shape[0], p) if training and p > 0 else None
    return linear_relu_keep_op(x, w, b, keep, x.dtype.type(1.0 / (1.0 - p)), needs)


def add_dropout_rows_op(x, s, p, training, s_needs_grad, rows):
    keep = keep_at_rows(rows, s.size // max(len(rows), 1), p).reshape(s.shape) if training and p > 0 else None
    return add_keep_op(x, s, keep, x.dtype.type(1.0 / (1.0 - p)), s_needs_grad)


def operand_rows_op(a, b, fn, slot, rows, kept, needs):
    """fn(a, b, needs), the region operand (slot) at rows and the other, a constant, at those rows'
    positions in the space's padded grid `kept` (B, T)."""
    x, operand = (a, b) if slot == 0 else (b, a)
    at = at_positions(operand, rows, kept.shape, x.ndim - 1)
    return fn(x, at, needs) if slot == 0 else fn(at, x, needs)


def at_positions(operand, rows, lead: tuple, rest: int):
    """A constant operand broadcasting to lead + rest dims, at the rows' positions: (n, rest...)."""
    k = operand.ndim - rest
    if k <= 0:
        return operand
    grid = (1,) * (len(lead) - k) + operand.shape[:k]
    flat = operand.reshape((math.prod(grid),) + operand.shape[k:])
    if math.prod(grid) == 1:
        return flat[0]
    coords = np.unravel_index(rows, lead)
    index = np.zeros(len(rows), dtype=np.int64)
    for axis, size in enumerate(grid):
        index = index * size + (coords[axis] if size > 1 else 0)
    return flat[index]


def same_rows_op(x):
    return x, lambda g: (g,)


def row_version(kind: tuple, fn, args: tuple, space_arrays, gathered) -> tuple:
    """(fn, args) that a region op runs on rows: space_arrays(space) gives the (kept, rows) stand-ins of a
    space, gathered(space, array) an id or target array's stand-in at its rows."""
    what, space = kind[0], kind[1]
    if what == "as_is":
        return fn, args
    if what in ("entry", "loss"):
        return fn, (gathered(space, args[0]),) + args[1:]
    if what == "attention":
        (q_kept, _), (k_kept, _) = space_arrays(space[0]), space_arrays(space[1])
        mask, p, training, scale, heads, needs, box = args
        return fused_attention_rows_op, (q_kept, k_kept, mask, p, training, scale, heads, needs, box)
    kept, rows = space_arrays(space)
    if what == "drop":
        drop = {dropout_op: dropout_rows_op, linear_relu_dropout_op: linear_relu_dropout_rows_op,
                add_dropout_op: add_dropout_rows_op}[fn]
        return drop, args + (rows,)
    if what == "operand":
        return operand_rows_op, (fn, kind[3], rows, kept, args[0])
    if what == "reshape":
        return same_rows_op, ()
    raise AssertionError(what)
