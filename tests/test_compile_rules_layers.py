"""The rewrite rules on the paper's layers: an EncoderLayer and a DecoderLayer (transformer/) run plain, their
boxes' own fused calls switched off in the step, and every rule fuses what it matches; the compiled step
agrees with the plain ops compiled and with eager mode."""
import sys

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.compiler.rules import SWITCHES
from transformer.decoder import DecoderLayer
from transformer.encoder import EncoderLayer
from transformer.masks import padding_mask, target_mask

sys.path.insert(0, "tests")  # this file's helpers, as pytest finds them
from rule_oracle import assert_agree, plan_of, sides  # noqa: E402


def batches(dtype, B=2, S=5, T=4, d_model=8):
    r = np.random.default_rng(7)
    out = []
    for _ in range(3):
        src, tgt = r.integers(0, 4, (B, S)), r.integers(0, 4, (B, T))
        src[:, 0] = tgt[:, 0] = 1  # no query row without a key to attend
        out.append((Tensor(r.standard_normal((B, S, d_model)).astype(dtype), requires_grad=True),
                    Tensor(r.standard_normal((B, T, d_model)).astype(dtype), requires_grad=True), src, tgt))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm_first", [False, True])
def test_an_encoder_and_a_decoder_layer_fuse_and_agree_with_eager(dtype, norm_first):
    tl.manual_seed(0)
    encoder = EncoderLayer(8, 2, 16, 0.2, norm_first, dtype=dtype)
    decoder = DecoderLayer(8, 2, 16, 0.2, norm_first, dtype=dtype)

    def step(x, y, src, tgt):
        memory = encoder(x, padding_mask(src))  # the boxes are plain: the rules, switched on at the call, fuse them
        out = decoder(y, memory, padding_mask(src), target_mask(tgt))
        loss = (out * out).mean()
        loss.backward()
        return loss
    params = list(encoder.parameters()) + list(decoder.parameters())
    out, fused, plain = sides(step, params, batches(dtype), SWITCHES)
    assert_agree(out, dtype)
    rules = [rule for rule, _ in plan_of(fused).fusions.values()]
    assert sorted(rules) == sorted(["attention"] * 3 + ["linear_relu_dropout"] * 2 + ["add_dropout"] * 5)
    assert not plan_of(plain).fusions
    names = plan_of(fused).op_names
    assert names.count("fused_attention") == 3 and "softmax (masked)" not in names and "relu" not in names
