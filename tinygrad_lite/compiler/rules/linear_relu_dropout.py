"""Rule linear_relu_dropout: the feed-forward's first half, dropout(relu(x·W1ᵀ + b1)), as one op."""
from __future__ import annotations

from ...nn.functional import linear_op
from ...nn.fused import linear_relu_dropout_op
from ...ops.nn import dropout_op
from ...ops.unary import relu_op
from .pattern import Fused, producer


class LinearReluDropout:
    """dropout(relu(linear(x, W, b))) -> nn.fused.linear_relu_dropout: the bias, ReLU and dropout
    in one pass over the product (kernels.fused), and a backward that needs no mask.

    Matches: linear -> relu -> dropout (training), or linear -> relu (eval, or p = 0: the plain
    dropout then records no op), with or without a bias. Emits: linear_relu_dropout_op(x, W, b, p,
    training, needs): one mask draw from the same stream, so the masks equal the plain chain's.
    Gain: SMALL 5-8%, TINY 3-8%; the GPT's MLP is GELU's, not matched."""

    name, switch, draws = "linear_relu_dropout", "fused_ffn", ("dropout",)

    def find(self, records: list) -> list:
        """The groups {"linear", "relu"[, "dropout"]}, with a dropout where one follows (candidates; the
        table checks that each is a group)."""
        groups = []
        for i, r in enumerate(records):
            if r is not None and r.fn is dropout_op:
                relu = producer(records, i, 0, relu_op)
                linear = None if relu is None else producer(records, relu, 0, linear_op)
                if linear is not None:
                    groups.append({"linear": linear, "relu": relu, "dropout": i})
        for i, r in enumerate(records):
            if r is not None and r.fn is relu_op and producer(records, i, 0, linear_op) is not None:
                groups.append({"linear": r.parents[0], "relu": i})
        return groups

    def emit(self, ops: dict):
        """The fused op, from the linear's parents and the dropout's p (none: p = 0, not training)."""
        linear = ops["linear"]
        x, w, *bias = linear.parents
        b = bias[0] if bias else None
        p, training = (ops["dropout"].args[0], True) if "dropout" in ops else (0.0, False)
        needs = tuple(t.requires_grad for t in linear.parents)
        if bias:
            return Fused(linear_relu_dropout_op, self.name, (x, w, b), (p, training, needs))
        return Fused(linear_relu_dropout_op, self.name, (x, w), (None, p, training, needs))
