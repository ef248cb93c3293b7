"""The PyTorch twin of transformer.gpt.GPT, shaped as nanoGPT's model.py (its module and key names).

For tests and benchmarks only: this module imports torch, and nothing in the library imports it
(transformer.gpt.interop.torch_gpt does, inside the function). Same architecture and dropout sites
as ours (transformer.gpt.block) and nanoGPT's: dropout on the embeddings, on the attention weights
and on each residual branch (the MLP's at its output). Weights come from ours through
interop.to_nanogpt_state_dict.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from tinygrad_lite.optim.muon import NS_COEFFICIENTS

from ..positional_encoding import sinusoidal_table

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh")}


class CausalSelfAttention(nn.Module):
    """q, k, v from one Linear (c_attn), Eq. 1 under a causal mask, then W^O (c_proj)."""

    def __init__(self, c):
        super().__init__()
        self.n_head, self.dropout = c.n_head, c.dropout
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # (B, h, T, d_k)
                   for t in self.c_attn(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))          # (B, T, C)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.act = ACTIVATIONS[c.activation]()
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x):
        return self.drop(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm_first = c.norm_first
        self.ln_1 = nn.LayerNorm(c.n_embd, bias=c.bias)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd, bias=c.bias)
        self.mlp = MLP(c)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x):
        if self.norm_first:
            x = x + self.drop(self.attn(self.ln_1(x)))
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.drop(self.attn(x)))
        return self.ln_2(x + self.mlp(x))


class TorchGPT(nn.Module):
    """forward(idx) -> logits (B, T, vocab_size); loss(idx, targets) -> mean cross-entropy."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        parts = {"wte": nn.Embedding(c.vocab_size, c.n_embd), "drop": nn.Dropout(c.dropout),
                 "h": nn.ModuleList([Block(c) for _ in range(c.n_layer)]),
                 "ln_f": nn.LayerNorm(c.n_embd, bias=c.bias)}
        if c.positions == "learned":
            parts["wpe"] = nn.Embedding(c.block_size, c.n_embd)
        else:
            self.register_buffer("pe", torch.from_numpy(sinusoidal_table(c.block_size, c.n_embd)), persistent=False)
        self.transformer = nn.ModuleDict(parts)
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def forward(self, idx):
        T = idx.shape[1]
        tr = self.transformer
        pos = tr.wpe(torch.arange(T, device=idx.device)) if "wpe" in tr else self.pe[:T]
        x = tr.drop(tr.wte(idx) + pos)
        for block in tr.h:
            x = block(x)
        return self.lm_head(tr.ln_f(x))

    def loss(self, idx, targets):
        logits = self(idx)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


def adamw(model: nn.Module, lr: float, betas: tuple, weight_decay: float) -> torch.optim.AdamW:
    """nanoGPT's configure_optimizers: decay on the matrices, none on biases and LayerNorm gains."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas)


class SplitMuon(torch.optim.Optimizer):
    """torch.optim.Muon's update (Nesterov momentum, Newton–Schulz, decoupled decay, the "original"
    lr ratio) with two changes that make it ours (tinygrad_lite.optim.Muon): the products in float32
    (torch's run in bfloat16, 5x slower on a CPU without bf16 units), and c_attn's three row blocks,
    W^Q, W^K and W^V, orthogonalized one by one as our three matrices are. A group's `chunks` says
    how many row blocks its matrices hold."""

    def __init__(self, params, lr: float, weight_decay: float, momentum: float = 0.95):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, chunks=1))

    @staticmethod
    def orthogonalize(G, coefficients=NS_COEFFICIENTS, steps: int = 5, eps: float = 1e-7):
        """tinygrad_lite.optim.muon.newton_schulz in torch: G / |G|, then X <- aX + (bA + cA²)X, A = XXᵀ."""
        a, b, c = coefficients
        tall = G.size(0) > G.size(1)
        X = G.T if tall else G
        X = X / X.norm().clamp(min=eps)
        for _ in range(steps):
            A = X @ X.T
            X = a * X + (b * A + c * A @ A) @ X
        return X.T if tall else X

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd, mu = group["lr"], group["weight_decay"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                buf.lerp_(p.grad, 1 - mu)
                update = p.grad.lerp(buf, mu)
                parts = [self.orthogonalize(u) * max(1.0, u.size(0) / u.size(1)) ** 0.5
                         for u in update.chunk(group["chunks"], dim=0)]
                p.mul_(1 - lr * wd)
                p.add_(torch.cat(parts), alpha=-lr)


def muon_and_adamw(model: nn.Module, lr: float, muon_lr: float, betas: tuple, weight_decay: float) -> list:
    """`gpt train --optimizer muon` on the twin: SplitMuon for the blocks' matrices (c_attn as three),
    AdamW for the embeddings (decayed) and the gains (not). Step both; set lrs in proportion."""
    hidden = {n: p for n, p in model.named_parameters() if n.startswith("transformer.h.") and p.dim() == 2}
    muon = SplitMuon([{"params": [p for n, p in hidden.items() if n.endswith("c_attn.weight")], "chunks": 3},
                      {"params": [p for n, p in hidden.items() if not n.endswith("c_attn.weight")]}],
                     lr=muon_lr, weight_decay=weight_decay)
    rest = [p for p in model.parameters() if all(p is not q for q in hidden.values())]
    groups = [{"params": [p for p in rest if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0}]
    return [muon, torch.optim.AdamW(groups, lr=lr, betas=betas)]
