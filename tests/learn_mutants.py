"""Wrong solutions, as learners write them: for each exercise of tinylearn, mutants that each make one
known mistake, with the name `check` must give it (tests/test_learn_exercises.py). Written apart from the
detectors in tinylearn/exercises/, so a test shows a detector recognises the mistake, not its own code."""
import math

import numpy as np

from tinygrad_lite.scalar import Value


# ---------------------------------------------------------------- 1 mul
def mul_swapped(a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data, (a, b), "*", (a.data, b.data))


def mul_add_slopes(a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data, (a, b), "*", (1.0, 1.0))


def mul_no_inputs(a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data)


def mul_number_unwrapped(a, b):
    return Value(a.data * b.data, (a, b), "*", (b.data, a.data))


# ---------------------------------------------------------------- 2 tanh
def tanh_input_slope(x):
    return Value(math.tanh(x.data), (x,), "tanh", (1 - x.data ** 2,))


def tanh_unsquared(x):
    t = math.tanh(x.data)
    return Value(t, (x,), "tanh", (1 - t,))


def tanh_sign(x):
    t = math.tanh(x.data)
    return Value(t, (x,), "tanh", (t * t - 1,))


def tanh_overflows(x):
    e = math.exp(2 * x.data)
    t = (e - 1) / (e + 1)
    return Value(t, (x,), "tanh", (1 - t * t,))


def tanh_no_input(x):
    t = math.tanh(x.data)
    return Value(t)


# ---------------------------------------------------------------- 3 topological order
def order_preorder(root):
    order, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        stack.extend(node.inputs)
    return order


def order_no_visited(root):
    order = []

    def visit(node):
        for child in node.inputs:
            visit(child)
        order.append(node)
    visit(root)
    return order


def order_one_level(root):
    return list(root.inputs) + [root]


def order_recursive(root):
    order, seen = [], set()

    def visit(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        for child in node.inputs:
            visit(child)
        order.append(node)
    visit(root)
    return order


# ---------------------------------------------------------------- 4 unbroadcast
def unbroadcast_unchanged(grad, shape):
    return grad


def unbroadcast_leading_only(grad, shape):
    return grad.sum(axis=tuple(range(grad.ndim - len(shape))))


def unbroadcast_no_keepdims(grad, shape):
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=stretched) if stretched else grad


def unbroadcast_mean(grad, shape):
    grad = grad.mean(axis=tuple(range(grad.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.mean(axis=stretched, keepdims=True) if stretched else grad


def _sum_to(grad, shape):
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=stretched, keepdims=True) if stretched else grad


# ---------------------------------------------------------------- 5 matmul backward
def matmul_no_transpose(a, b, g):
    return _sum_to(g @ b, a.shape), _sum_to(a @ g, b.shape)


def matmul_batch_not_summed(a, b, g):
    return g @ np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2) @ g


def matmul_swapped_results(a, b, g):
    return _sum_to(np.swapaxes(a, -1, -2) @ g, b.shape), _sum_to(g @ np.swapaxes(b, -1, -2), a.shape)


def matmul_transposed_gradient(a, b, g):
    da = _sum_to(g @ np.swapaxes(b, -1, -2), a.shape)
    return np.swapaxes(da, -1, -2), _sum_to(np.swapaxes(a, -1, -2) @ g, b.shape)


# ---------------------------------------------------------------- 6 softmax
def _z(x, scale, mask):
    z = x * scale
    if mask is not None:
        z = z + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    return z


def softmax_no_shift(x, scale=1.0, mask=None):
    e = np.exp(_z(x, scale, mask))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_nan_row(x, scale=1.0, mask=None):
    z = _z(x, scale, mask)
    e = np.exp(z - z.max(axis=-1, keepdims=True)) if z.size else z
    return e / e.sum(axis=-1, keepdims=True)


def _safe(z, axis):
    if not z.size:
        return z
    top = z.max(axis=axis, keepdims=True)
    e = np.exp(z - np.where(np.isneginf(top), 0.0, top))
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def softmax_axis0(x, scale=1.0, mask=None):
    return _safe(_z(x, scale, mask), 0)


def softmax_ignores_mask(x, scale=1.0, mask=None):
    return _safe(_z(x, scale, None), -1)


def softmax_inverted_mask(x, scale=1.0, mask=None):
    if mask is not None and mask.dtype == bool:
        mask = ~mask
    return _safe(_z(x, scale, mask), -1)


def softmax_ignores_scale(x, scale=1.0, mask=None):
    return _safe(_z(x, 1.0, mask), -1)


# ---------------------------------------------------------------- 7 softmax backward
def softmax_backward_no_sum(y, dy, scale=1.0):
    return scale * y * dy


def softmax_backward_axis0(y, dy, scale=1.0):
    return scale * y * (dy - (dy * y).sum(axis=0, keepdims=True))


def softmax_backward_no_scale(y, dy, scale=1.0):
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def softmax_backward_sign(y, dy, scale=1.0):
    return scale * y * ((dy * y).sum(axis=-1, keepdims=True) - dy)


MUTANTS = {
    "mul": [(mul_swapped, "the slopes swapped"), (mul_add_slopes, "addition's slopes"),
            (mul_no_inputs, "the inputs not recorded"), (mul_number_unwrapped, "a number not made a Value")],
    "tanh": [(tanh_input_slope, "the slope from the input, 1 − x²"),
             (tanh_unsquared, "the slope without its square, 1 − t"),
             (tanh_sign, "the slope's sign flipped"), (tanh_overflows, "tanh overflows at large x"),
             (tanh_no_input, "the input not recorded")],
    "topological_order": [(order_preorder, "nodes before their inputs (pre-order)"),
                          (order_no_visited, "no set of visited nodes"), (order_one_level, "only part of the graph"),
                          (order_recursive, "recursion too deep")],
    "unbroadcast": [(unbroadcast_unchanged, "the gradient keeps the output's shape"),
                    (unbroadcast_leading_only, "the stretched axes left out"),
                    (unbroadcast_no_keepdims, "the kept axes dropped"),
                    (unbroadcast_mean, "an average instead of a sum")],
    "matmul_backward": [(matmul_no_transpose, "the transpose forgotten"),
                        (matmul_batch_not_summed, "the batch not summed"),
                        (matmul_swapped_results, "da and db swapped"),
                        (matmul_transposed_gradient, "a gradient transposed")],
    "softmax": [(softmax_no_shift, "no max shift"), (softmax_nan_row, "a fully masked row gives NaN"),
                (softmax_axis0, "the wrong axis"), (softmax_ignores_mask, "the mask ignored"),
                (softmax_inverted_mask, "the mask inverted"), (softmax_ignores_scale, "the scale ignored")],
    "softmax_backward": [(softmax_backward_no_sum, "the sum term missing"),
                         (softmax_backward_axis0, "the sum over the wrong axis"),
                         (softmax_backward_no_scale, "the scale forgotten"),
                         (softmax_backward_sign, "the sign flipped")],
}


# ---------------------------------------------------------------- 8 layer norm backward
def _ln_parts(dy, x, gamma, mean, rstd):
    xhat = (x - mean) * rstd
    g = dy if gamma is None else dy * gamma
    grads = (None, None) if gamma is None else ((dy * xhat).sum(axis=0), dy.sum(axis=0))
    return xhat, g, grads


def layernorm_no_variance_term(dy, x, gamma, mean, rstd):
    xhat, g, (dgamma, dbeta) = _ln_parts(dy, x, gamma, mean, rstd)
    return rstd * (g - g.mean(axis=-1, keepdims=True)), dgamma, dbeta


def layernorm_no_mean_term(dy, x, gamma, mean, rstd):
    xhat, g, (dgamma, dbeta) = _ln_parts(dy, x, gamma, mean, rstd)
    return rstd * (g - xhat * (g * xhat).mean(axis=-1, keepdims=True)), dgamma, dbeta


def layernorm_no_gamma(dy, x, gamma, mean, rstd):
    xhat, _, (dgamma, dbeta) = _ln_parts(dy, x, gamma, mean, rstd)
    return rstd * (dy - dy.mean(axis=-1, keepdims=True) - xhat * (dy * xhat).mean(axis=-1, keepdims=True)), \
        dgamma, dbeta


def layernorm_params_wrong_axis(dy, x, gamma, mean, rstd):
    xhat, g, _ = _ln_parts(dy, x, gamma, mean, rstd)
    dx = rstd * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return (dx, None, None) if gamma is None else (dx, (dy * xhat).sum(axis=-1), dy.sum(axis=-1))


# ---------------------------------------------------------------- 9 dropout
def dropout_at_eval(x, p, training, rng):
    if p == 1:
        return np.zeros_like(x)
    return x * (rng.random(x.shape) >= p) / (1 - p)


def dropout_divides_by_zero(x, p, training, rng):
    if not training:
        return x
    return x * (rng.random(x.shape) >= p) / (1 - p)


def dropout_keep_probability(x, p, training, rng):
    if not training or p == 0:
        return x
    if p == 1:
        return np.zeros_like(x)
    return x * (rng.random(x.shape) < p) / p


def dropout_no_rescale(x, p, training, rng):
    if not training:
        return x
    return x * (rng.random(x.shape) >= p)


def dropout_times_keep(x, p, training, rng):
    if not training:
        return x
    return x * (rng.random(x.shape) >= p) * (1 - p)


# ---------------------------------------------------------------- 10 cross-entropy
def _log_softmax(x):
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _ce(logp, targets, eps, reduce=np.mean):
    if not len(targets):
        return 0.0
    rows = np.arange(len(targets))
    return float(reduce((1 - eps) * -logp[rows, targets] - eps * logp.mean(axis=1)))


def ce_log_of_softmax(logits, targets, label_smoothing):
    if not len(targets):
        return 0.0
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return _ce(np.log(e / e.sum(axis=1, keepdims=True)), targets, label_smoothing)


def ce_empty_nan(logits, targets, label_smoothing):
    logp = _log_softmax(logits) if len(targets) else logits
    rows = np.arange(len(targets))
    return float(np.mean((1 - label_smoothing) * -logp[rows, targets] - label_smoothing * logp.mean(axis=1)))


def ce_no_smoothing(logits, targets, label_smoothing):
    return _ce(_log_softmax(logits), targets, 0.0) if len(targets) else 0.0


def ce_others_only(logits, targets, label_smoothing):
    if not len(targets):
        return 0.0
    logp = _log_softmax(logits)
    rows, off = np.arange(len(targets)), label_smoothing / (logits.shape[1] - 1)
    per = -(1 - label_smoothing) * logp[rows, targets] - off * (logp.sum(axis=1) - logp[rows, targets])
    return float(per.mean())


def ce_sum(logits, targets, label_smoothing):
    return _ce(_log_softmax(logits), targets, label_smoothing, np.sum) if len(targets) else 0.0


# ---------------------------------------------------------------- 11 Adam
def _decay(param, grad, lr, weight_decay, decoupled):
    if weight_decay and decoupled:
        param *= 1 - lr * weight_decay
    elif weight_decay:
        grad = grad + weight_decay * param
    return grad


def adam_not_in_place(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    grad = _decay(param.copy(), grad, lr, weight_decay, decoupled)
    exp_avg = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    param = param - lr * (exp_avg / (1 - beta1 ** step)) / (np.sqrt(exp_avg_sq / (1 - beta2 ** step)) + eps)


def adam_no_correction(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    grad = _decay(param, grad, lr, weight_decay, decoupled)
    exp_avg[...] = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq[...] = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    param -= lr * exp_avg / (np.sqrt(exp_avg_sq) + eps)


def adam_eps_inside(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    grad = _decay(param, grad, lr, weight_decay, decoupled)
    exp_avg[...] = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq[...] = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    param -= lr * (exp_avg / (1 - beta1 ** step)) / np.sqrt(exp_avg_sq / (1 - beta2 ** step) + eps)


def adam_v_from_g(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    grad = _decay(param, grad, lr, weight_decay, decoupled)
    exp_avg[...] = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq[...] = beta2 * exp_avg_sq + (1 - beta2) * grad
    param -= lr * (exp_avg / (1 - beta1 ** step)) / (np.sqrt(exp_avg_sq / (1 - beta2 ** step)) + eps)


def adam_step_from_zero(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    grad = _decay(param, grad, lr, weight_decay, decoupled)
    exp_avg[...] = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq[...] = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    t = step - 1
    param -= lr * (exp_avg / (1 - beta1 ** t)) / (np.sqrt(exp_avg_sq / (1 - beta2 ** t)) + eps)


def adam_decay_swapped(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    grad = _decay(param, grad, lr, weight_decay, not decoupled)
    exp_avg[...] = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq[...] = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    param -= lr * (exp_avg / (1 - beta1 ** step)) / (np.sqrt(exp_avg_sq / (1 - beta2 ** step)) + eps)


# ---------------------------------------------------------------- 12 warm-up
def warmup_max(step, d_model, warmup):
    return d_model ** -0.5 * max(step ** -0.5, step * warmup ** -1.5)


def warmup_wrong_exponent(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5)


def warmup_no_d_model(step, d_model, warmup):
    return min(step ** -0.5, step * warmup ** -1.5)


def warmup_from_zero(step, d_model, warmup):
    step += 1
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


MUTANTS.update({
    "layernorm_backward": [(layernorm_no_variance_term, "the mean(g·x̂) term missing"),
                           (layernorm_no_mean_term, "the mean(g) term missing"),
                           (layernorm_no_gamma, "gamma left out of dx"),
                           (layernorm_params_wrong_axis, "dgamma or dbeta summed over the wrong axis")],
    "dropout": [(dropout_at_eval, "dropout at evaluation time"), (dropout_divides_by_zero, "p = 1 divides by zero"),
                (dropout_keep_probability, "p taken as the keep probability"), (dropout_no_rescale, "no rescaling"),
                (dropout_times_keep, "scaled by (1 − p)")],
    "cross_entropy": [(ce_log_of_softmax, "the log of a softmax that underflowed"),
                      (ce_empty_nan, "an empty batch gives NaN"), (ce_no_smoothing, "no label smoothing"),
                      (ce_others_only, "ε spread over the other classes only"),
                      (ce_sum, "a sum over the batch, not a mean")],
    "adam_update": [(adam_not_in_place, "not in place"), (adam_no_correction, "no bias correction"),
                    (adam_eps_inside, "ε inside the square root"), (adam_v_from_g, "v from g, not g²"),
                    (adam_step_from_zero, "the bias correction from step 0"),
                    (adam_decay_swapped, "the weight decays swapped")],
    "warmup": [(warmup_max, "max instead of min"), (warmup_wrong_exponent, "the warm-up exponent −0.5"),
               (warmup_no_d_model, "d_model^−0.5 left out"), (warmup_from_zero, "the steps counted from 0")],
})


# ---------------------------------------------------------------- 13 attention
def attention_no_scale(q, k, v, mask=None):
    return (q @ k.transpose(-2, -1)).softmax(-1, mask=mask) @ v


def attention_over_d_k(q, k, v, mask=None):
    return (q @ k.transpose(-2, -1) / q.shape[-1]).softmax(-1, mask=mask) @ v


def attention_over_queries(q, k, v, mask=None):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-2, mask=mask) @ v


def attention_mask_ignored(q, k, v, mask=None):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) @ v


def attention_mask_inverted(q, k, v, mask=None):
    mask = None if mask is None else ~np.asarray(mask)
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1, mask=mask) @ v


def attention_large_negative(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~np.broadcast_to(mask, scores.shape), -1e9)
    return scores.softmax(-1) @ v


def attention_k_not_transposed(q, k, v, mask=None):
    return (q @ k / math.sqrt(q.shape[-1])).softmax(-1, mask=mask) @ v


# ---------------------------------------------------------------- 14 split heads
def split_straight(x, h):
    B, T, d = x.shape
    return x.reshape(B, h, T, d // h)


def split_not_transposed(x, h):
    B, T, d = x.shape
    return x.reshape(B, T, h, d // h)


def split_round_robin(x, h):
    B, T, d = x.shape
    return x.reshape(B, T, d // h, h).transpose(0, 3, 1, 2)


def split_wrong_transpose(x, h):
    B, T, d = x.shape
    return x.reshape(B, T, h, d // h).transpose(0, 2, 3, 1)


# ---------------------------------------------------------------- 15 merge heads
def merge_straight(x):
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)


def merge_not_reshaped(x):
    return x.transpose(0, 2, 1, 3)


def merge_interleaved(x):
    B, h, T, d_k = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, T, h * d_k)


# ---------------------------------------------------------------- 16 causal mask
def causal_strict(size):
    return np.tril(np.ones((size, size), dtype=bool), -1)[None, None]


def causal_upper(size):
    return np.triu(np.ones((size, size), dtype=bool))[None, None]


def causal_true_masked(size):
    return np.triu(np.ones((size, size), dtype=bool), 1)[None, None]


def causal_no_axes(size):
    return np.tril(np.ones((size, size), dtype=bool))


def causal_floats(size):
    return np.tril(np.ones((size, size)))[None, None]


# ---------------------------------------------------------------- 17 positional encoding
def _angles(length, d_model, start=0):
    return np.arange(start, start + length)[:, None] / 10000.0 ** (np.arange(0, d_model, 2) / d_model)


def pe_swapped(length, d_model):
    table, angles = np.zeros((length, d_model)), _angles(length, d_model)
    table[:, 0::2], table[:, 1::2] = np.cos(angles), np.sin(angles[:, :d_model // 2])
    return table


def pe_per_column(length, d_model):
    angles = np.arange(length)[:, None] / 10000.0 ** (np.arange(d_model) / d_model)
    table = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, 1::2])
    return table


def pe_from_one(length, d_model):
    table, angles = np.zeros((length, d_model)), _angles(length, d_model, 1)
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles[:, :d_model // 2])
    return table


def pe_all_sines(length, d_model):
    table, angles = np.zeros((length, d_model)), _angles(length, d_model)
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.sin(angles[:, :d_model // 2])
    return table


def pe_odd_fails(length, d_model):
    table, angles = np.zeros((length, d_model)), _angles(length, d_model)
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table


MUTANTS.update({
    "attention": [(attention_no_scale, "no √d_k"), (attention_over_d_k, "divided by d_k, not √d_k"),
                  (attention_over_queries, "the softmax over the queries"),
                  (attention_mask_ignored, "the mask ignored"), (attention_mask_inverted, "the mask inverted"),
                  (attention_large_negative, "masked with a large negative number, not −inf"),
                  (attention_k_not_transposed, "k not transposed")],
    "split_heads": [(split_straight, "reshaped straight to (B, h, T, d_k)"),
                    (split_not_transposed, "the heads left after the positions"),
                    (split_round_robin, "features dealt out in turn"),
                    (split_wrong_transpose, "positions and features swapped")],
    "merge_heads": [(merge_straight, "reshaped without moving the heads back"),
                    (merge_not_reshaped, "the heads left as their own axis"),
                    (merge_interleaved, "heads interleaved feature by feature")],
    "causal_mask": [(causal_strict, "the diagonal masked"), (causal_upper, "the future allowed"),
                    (causal_true_masked, "True = masked"), (causal_no_axes, "no broadcast axes"),
                    (causal_floats, "numbers, not booleans")],
    "positional_encoding": [(pe_swapped, "sin and cos swapped"),
                            (pe_per_column, "a frequency per column, not per pair"),
                            (pe_from_one, "positions from 1"), (pe_all_sines, "sines everywhere"),
                            (pe_odd_fails, "an odd d_model fails")],
})


# ---------------------------------------------------------------- 18 greedy decoding
def _greedy(decode_step, batch, bos_id, eos_id, pad_id, max_len, feed_all=False, shift=0, pad=True, score_all=False,
            stop_any=False, stop=True):
    prefix, done, score = np.full((batch, 1), bos_id), np.zeros(batch, bool), np.zeros(batch)
    for _ in range(max_len):
        tokens = prefix if feed_all else prefix[:, -1:]
        logp = decode_step(tokens, prefix.shape[1] - 1 + shift)
        nxt = logp.argmax(axis=-1)
        score += logp[np.arange(batch), nxt] * (1 if score_all else ~done)
        if pad:
            nxt = np.where(done, pad_id, nxt)
        prefix = np.concatenate([prefix, nxt[:, None]], axis=1)
        done = done | (nxt == eos_id)
        if stop and (done.any() if stop_any else done.all()):
            break
    return prefix[:, 1:], score


def greedy_feeds_prefix(*args):
    return _greedy(*args, feed_all=True)


def greedy_position_plus_one(*args):
    return _greedy(*args, shift=1)


def greedy_no_pad(*args):
    return _greedy(*args, pad=False)


def greedy_scores_after_eos(*args):
    return _greedy(*args, score_all=True)


def greedy_stops_at_first(*args):
    return _greedy(*args, stop_any=True)


def greedy_never_stops(*args):
    return _greedy(*args, stop=False)


# ---------------------------------------------------------------- 19 beam step
def _ranked(scores, logp, beam_size, values, descending=True, divisor=None):
    order = np.argsort(-values.reshape(-1) if descending else values.reshape(-1), kind="stable")[:beam_size]
    rows, tokens = np.divmod(order, divisor or logp.shape[1])
    return rows, tokens, (scores[:, None] + logp).reshape(-1)[order]


def beam_by_new_token(scores, logp, beam_size):
    return _ranked(scores, logp, beam_size, logp)


def beam_per_row(scores, logp, beam_size):
    total = scores[:, None] + logp
    best = total.argmax(axis=1)
    rows = np.argsort(-total[np.arange(len(scores)), best], kind="stable")[:beam_size]
    return rows, best[rows], total[rows, best[rows]]


def beam_worst_first(scores, logp, beam_size):
    return _ranked(scores, logp, beam_size, scores[:, None] + logp, descending=False)


def beam_divmod_by_rows(scores, logp, beam_size):
    return _ranked(scores, logp, beam_size, scores[:, None] + logp, divisor=max(len(scores), 1))


MUTANTS.update({
    "greedy_decode": [(greedy_feeds_prefix, "the whole prefix fed again"),
                      (greedy_position_plus_one, "positions off by one"), (greedy_no_pad, "no padding after <eos>"),
                      (greedy_scores_after_eos, "scores counted after <eos>"),
                      (greedy_stops_at_first, "a stop at the first <eos>"), (greedy_never_stops, "no early stop")],
    "beam_step": [(beam_by_new_token, "ranked by the new token alone"),
                  (beam_per_row, "the best token of each row only"), (beam_worst_first, "the worst first"),
                  (beam_divmod_by_rows, "row and token from the wrong divisor")],
})
