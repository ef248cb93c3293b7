"""Carry a GPT's weights to PyTorch and back, under nanoGPT's (GPT-2's) key names.

`torch_gpt(config)` builds the PyTorch twin (transformer.gpt.torch_twin, nanoGPT-shaped); torch is imported
only inside these functions, never by the engine. Names (ours -> nanoGPT's), per block i:

    token_embedding.weight              -> transformer.wte.weight, and lm_head.weight (tied)
    position_embedding.weight           -> transformer.wpe.weight (learned positions only)
    blocks.i.ln_1                       -> transformer.h.i.ln_1
    blocks.i.attn.w_q, w_k, w_v         -> transformer.h.i.attn.c_attn (stacked: 3·n_embd × n_embd)
    blocks.i.attn.w_o                   -> transformer.h.i.attn.c_proj
    blocks.i.ln_2                       -> transformer.h.i.ln_2
    blocks.i.mlp.c_fc, mlp.c_proj       -> transformer.h.i.mlp.c_fc, mlp.c_proj
    norm                                -> transformer.ln_f

A nanoGPT checkpoint (`ckpt["model"]`, its config in `ckpt["model_args"]`) loads as it is: the causal-
mask buffers `attn.bias` nanoGPT keeps without flash attention are skipped, and torch.compile's
`_orig_mod.` prefix is stripped. (OpenAI's GPT-2 files store Conv1D weights transposed; nanoGPT's
from_pretrained turns them into this layout.)
"""
from __future__ import annotations

import numpy as np

from .model import GPT

_QKV = ("w_q", "w_k", "w_v")
_COMPILED_PREFIX = "_orig_mod."


def _name_map(model: GPT) -> dict:
    """Our parameter name -> nanoGPT's, for every parameter but the stacked q, k, v."""
    names = {"token_embedding.weight": "transformer.wte.weight", "norm.weight": "transformer.ln_f.weight",
             "norm.bias": "transformer.ln_f.bias", "position_embedding.weight": "transformer.wpe.weight"}
    parts = {"ln_1": "ln_1", "attn.w_o": "attn.c_proj", "ln_2": "ln_2", "mlp.c_fc": "mlp.c_fc",
             "mlp.c_proj": "mlp.c_proj"}
    for i in range(model.config.n_layer):
        for ours, theirs in parts.items():
            for p in ("weight", "bias"):
                names[f"blocks.{i}.{ours}.{p}"] = f"transformer.h.{i}.{theirs}.{p}"
    return names


def to_nanogpt_state_dict(model: GPT) -> dict:
    """Our weights as a nanoGPT state dict (torch tensors), lm_head.weight included: loads with
    strict=True into torch_gpt(model.config) or nanoGPT's own GPT of the same config."""
    import torch
    ours = model.state_dict()
    out = {theirs: torch.from_numpy(np.array(ours[name])) for name, theirs in _name_map(model).items()
           if name in ours}
    for i in range(model.config.n_layer):
        for p in ("weight", "bias"):
            keys = [f"blocks.{i}.attn.{w}.{p}" for w in _QKV]
            if keys[0] in ours:
                out[f"transformer.h.{i}.attn.c_attn.{p}"] = torch.from_numpy(
                    np.concatenate([ours[k] for k in keys], axis=0))              # (3·n_embd, ...)
    out["lm_head.weight"] = out["transformer.wte.weight"]
    return out


def _arrays(state_dict: dict) -> dict:
    """nanoGPT's state dict as NumPy arrays, without compile prefixes and mask buffers."""
    out = {}
    for key, value in state_dict.items():
        key = key[len(_COMPILED_PREFIX):] if key.startswith(_COMPILED_PREFIX) else key
        if key.endswith(".attn.bias"):
            continue  # nanoGPT's causal mask (B, 1, T, T) buffer, not a weight
        out[key] = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
    return out


def load_nanogpt_state_dict(model: GPT, state_dict: dict, strict: bool = True) -> GPT:
    """Load a nanoGPT state dict (torch tensors or arrays) into our model; returns the model.
    strict=True raises for missing or unexpected keys (see Module.load_state_dict)."""
    sd = _arrays(state_dict)
    ours = {name: sd.pop(theirs) for name, theirs in _name_map(model).items() if theirs in sd}
    d = model.config.n_embd
    for i in range(model.config.n_layer):
        for p in ("weight", "bias"):
            stacked = sd.pop(f"transformer.h.{i}.attn.c_attn.{p}", None)
            if stacked is not None:
                for j, w in enumerate(_QKV):
                    ours[f"blocks.{i}.attn.{w}.{p}"] = stacked[j * d:(j + 1) * d]
    lm_head = sd.pop("lm_head.weight", None)
    if lm_head is not None and "token_embedding.weight" in ours and \
            not np.array_equal(lm_head, ours["token_embedding.weight"]):
        raise ValueError("load_nanogpt_state_dict: lm_head.weight differs from transformer.wte.weight; "
                         "our GPT ties them, so it cannot hold this model")
    if strict and sd:
        raise ValueError(f"load_nanogpt_state_dict: unexpected keys {sorted(sd)} for {model.config}")
    model.load_state_dict(ours, strict=strict)
    return model


def torch_gpt(config):
    """The nanoGPT-shaped PyTorch model of a GPTConfig (or of a GPT's config), float32, freshly
    initialised: copy weights in with load_state_dict(to_nanogpt_state_dict(ours))."""
    from .torch_twin import TorchGPT
    return TorchGPT(config.config if isinstance(config, GPT) else config)
