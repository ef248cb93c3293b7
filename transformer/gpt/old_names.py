"""The parameter names of GPTs saved before the GPT had its own block (transformer.gpt.block), when
each block was the translator's EncoderLayer under a causal mask. GPT.load_state_dict renames them,
so those checkpoints load with the same logits (tests/test_gpt.py):

    blocks.i.self_attn.*            -> blocks.i.attn.*
    blocks.i.add_norm1.norm.*       -> blocks.i.ln_1.*
    blocks.i.add_norm2.norm.*       -> blocks.i.ln_2.*
    blocks.i.feed_forward.w_1.*     -> blocks.i.mlp.c_fc.*
    blocks.i.feed_forward.w_2.*     -> blocks.i.mlp.c_proj.*
"""
from __future__ import annotations

import re

RENAMED = {"self_attn": "attn", "add_norm1.norm": "ln_1", "add_norm2.norm": "ln_2",
           "feed_forward.w_1": "mlp.c_fc", "feed_forward.w_2": "mlp.c_proj"}
OLD_KEY = re.compile(r"^(blocks\.\d+\.)(" + "|".join(re.escape(old) for old in RENAMED) + r")\.")


def with_block_names(state_dict):
    """state_dict with each old block key under its new name; anything else (and a non-dict) as it is."""
    if not hasattr(state_dict, "items"):
        return state_dict
    return {OLD_KEY.sub(lambda m: m.group(1) + RENAMED[m.group(2)] + ".", key): value
            for key, value in state_dict.items()}
