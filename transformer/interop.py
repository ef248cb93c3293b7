"""Carry weights between our Transformer and PyTorch's `torch.nn.Transformer`.

The PyTorch side is `torch_reference(config)`: `nn.Transformer(batch_first=True)` plus
source/target embeddings (× √d_model), sinusoidal PE and the generator, so a model
trained here can continue in PyTorch (and its distributed training), and back.
torch is imported only inside these functions; it is never a dependency of the engine.

Name mapping (ours -> PyTorch), per layer i:
    encoder.layers.i.self_attn.w_q/w_k/w_v  -> transformer.encoder.layers.i.self_attn.in_proj_weight
                                              (stacked: 3·d_model × d_model) and in_proj_bias
    *.self_attn.w_o                         -> *.self_attn.out_proj
    decoder.layers.i.cross_attn             -> transformer.decoder.layers.i.multihead_attn
    *.feed_forward.w_1 / w_2                -> *.linear1 / *.linear2
    *.add_norm1/2/3.norm                    -> *.norm1/2/3
    encoder.norm / decoder.norm             -> transformer.encoder.norm / transformer.decoder.norm
nn.Transformer always has those two final norms, so the model must be built with
final_norm=True to map one-to-one.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .model import Transformer
from .positional_encoding import sinusoidal_table

_ATTN = {"self_attn": "self_attn", "cross_attn": "multihead_attn"}
_FFN = {"w_1": "linear1", "w_2": "linear2"}


def _name_map(model: Transformer) -> dict:
    """Our parameter name -> PyTorch's, for every parameter except the stacked q/k/v."""
    names = {"src_embed.lut.weight": "src_embed.weight", "tgt_embed.lut.weight": "tgt_embed.weight",
             "generator.weight": "generator.weight", "generator.bias": "generator.bias"}
    for stack in ("encoder", "decoder"):
        names[f"{stack}.norm.weight"] = f"transformer.{stack}.norm.weight"
        names[f"{stack}.norm.bias"] = f"transformer.{stack}.norm.bias"
        for i in range(model.config.N):
            ours, theirs = f"{stack}.layers.{i}", f"transformer.{stack}.layers.{i}"
            for p in ("weight", "bias"):
                for a, ta in _ATTN.items():
                    names[f"{ours}.{a}.w_o.{p}"] = f"{theirs}.{ta}.out_proj.{p}"
                for f, tf in _FFN.items():
                    names[f"{ours}.feed_forward.{f}.{p}"] = f"{theirs}.{tf}.{p}"
                for k in (1, 2, 3):
                    names[f"{ours}.add_norm{k}.norm.{p}"] = f"{theirs}.norm{k}.{p}"
    return names


def _attention_blocks(model: Transformer):
    for stack in ("encoder", "decoder"):
        for i in range(model.config.N):
            for a, ta in _ATTN.items():
                if stack == "encoder" and a == "cross_attn":
                    continue
                yield f"{stack}.layers.{i}.{a}", f"transformer.{stack}.layers.{i}.{ta}"


def _require_final_norm(model: Transformer, what: str):
    if not model.config.final_norm:
        raise ValueError(f"{what}: torch.nn.Transformer always ends each stack with a LayerNorm; "
                         "build the model with final_norm=True to map weights one-to-one")


def to_torch_state_dict(model: Transformer) -> dict:
    """Our weights as a state dict for `torch_reference(model.config)` (torch tensors)."""
    import torch
    _require_final_norm(model, "to_torch_state_dict")
    ours = model.state_dict()
    out = {theirs: torch.from_numpy(np.array(ours[name])) for name, theirs in _name_map(model).items()
           if name in ours}
    for block, theirs in _attention_blocks(model):
        for p in ("weight", "bias"):
            stacked = np.concatenate([ours[f"{block}.{w}.{p}"] for w in ("w_q", "w_k", "w_v")], axis=0)
            out[f"{theirs}.in_proj_{p}"] = torch.from_numpy(stacked)
    return out


def load_torch_state_dict(model: Transformer, state_dict: dict, strict: bool = True) -> Transformer:
    """Load a `torch_reference` state dict (torch tensors or arrays) into our model."""
    _require_final_norm(model, "load_torch_state_dict")
    sd = {k: (v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)) for k, v in state_dict.items()}
    ours = {}
    for name, theirs in _name_map(model).items():
        if theirs in sd:
            ours[name] = sd[theirs]
    d = model.config.d_model
    for block, theirs in _attention_blocks(model):
        for p in ("weight", "bias"):
            key = f"{theirs}.in_proj_{p}"
            if key in sd:
                for j, w in enumerate(("w_q", "w_k", "w_v")):
                    ours[f"{block}.{w}.{p}"] = sd[key][j * d:(j + 1) * d]
    model.load_state_dict(ours, strict=strict)
    return model


def torch_reference(config):
    """The PyTorch model our Transformer maps onto: nn.Transformer(batch_first=True) with
    embeddings × √d_model, sinusoidal PE, dropout on their sum (as ours) and a generator.
    forward(src, tgt) -> logits."""
    import torch
    from torch import nn

    c = config if not isinstance(config, Transformer) else config.config

    class TorchSeq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.pad_id, self.d_model = c.pad_id, c.d_model
            self.src_embed = nn.Embedding(c.src_vocab, c.d_model, padding_idx=c.pad_id)
            self.tgt_embed = nn.Embedding(c.tgt_vocab, c.d_model, padding_idx=c.pad_id)
            with warnings.catch_warnings():  # with norm_first, torch says it cannot use its nested-tensor
                # fast path (an inference speed-up): nothing to act on for a reference model
                warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
                self.transformer = nn.Transformer(c.d_model, c.h, c.N, c.N, c.d_ff, c.dropout, batch_first=True,
                                                  norm_first=c.norm_first)
            self.transformer.encoder.enable_nested_tensor = False
            self.dropout = nn.Dropout(c.dropout)  # after embedding + PE, as ours (paper §5.4)
            self.generator = nn.Linear(c.d_model, c.tgt_vocab)
            if c.tie_embeddings:
                self.generator.weight = self.tgt_embed.weight

        def embed(self, embedding, ids):
            pe = torch.from_numpy(sinusoidal_table(ids.shape[1], self.d_model))
            scaled = embedding(ids) * math.sqrt(self.d_model)
            return self.dropout(scaled + pe.to(embedding.weight.device, embedding.weight.dtype))

        def encode(self, src):
            return self.transformer.encoder(self.embed(self.src_embed, src),
                                            src_key_padding_mask=src == self.pad_id)

        def decode(self, memory, src, tgt):
            T = tgt.shape[1]
            causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=tgt.device), 1)  # True = hidden
            out = self.transformer.decoder(self.embed(self.tgt_embed, tgt), memory, tgt_mask=causal,
                                           tgt_key_padding_mask=tgt == self.pad_id,
                                           memory_key_padding_mask=src == self.pad_id, tgt_is_causal=True)
            return self.generator(out)

        def forward(self, src, tgt):
            return self.decode(self.encode(src), src, tgt)

    return TorchSeq2Seq()
