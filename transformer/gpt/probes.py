"""A GPT's side of the live training page (`python -m transformer gpt train --explore`,
transformer.events): a few prompts cut from the val split, continued greedily by the model as it is
at each evaluation, with the causal self-attention of every block and head over prompt and
continuation, as the translator's probes show its translations and cross-attention."""
from __future__ import annotations

import numpy as np

from .sampling import generate

PROBES, PROMPT, CONTINUATION = 3, 16, 16  # prompts, and the tokens of each prompt and of its continuation


def token_label(text: str) -> str:
    """A token as the heatmap's axis shows it: a newline as ↵, a space as ␣."""
    return text.replace("\n", "↵").replace(" ", "␣") or "∅"


def line_start(ids, start: int, length: int, decode, look: int = 80) -> int:
    """The first place at or after `start` (within `look` tokens) that begins a line, so a prompt
    reads from a line's start; `start` itself if none does."""
    for i in range(start, min(start + look, len(ids) - length + 1)):
        if i == 0 or decode([int(ids[i - 1])]).endswith("\n"):
            return i
    return start


class TextProbes:
    """PROBES prompts of PROMPT tokens from evenly spaced places of the val split (`inputs`, as text),
    each continued greedily by CONTINUATION tokens (run), both kept inside the model's block_size."""
    task = "language model"

    def __init__(self, trainer, count: int = PROBES):
        self.trainer = trainer
        ids, block = trainer.data.ids["val"], trainer.model.config.block_size
        self.new_tokens = min(CONTINUATION, block // 2)
        length = max(1, min(PROMPT, block - self.new_tokens, len(ids)))
        decode = trainer.data.tokenizer.decode
        starts = [line_start(ids, i * (len(ids) - length) // count, length, decode) for i in range(count)]
        self.prompts = [np.asarray(ids[s:s + length]) for s in sorted(set(starts))]
        self.inputs = [decode(p) for p in self.prompts]

    def config(self) -> dict:
        """The run's sizes under the page's names (the translator's: d_model, heads, layers, ...)."""
        cfg = self.trainer.cfg
        return {"d_model": cfg.n_embd, "heads": cfg.n_head, "layers": cfg.n_layer, "d_ff": 4 * cfg.n_embd,
                "dropout": cfg.dropout, "label_smoothing": 0.0, "clip": cfg.grad_clip, "max_steps": cfg.max_iters,
                "minutes": cfg.minutes, "seed": cfg.seed, "block_size": cfg.block_size}

    def run(self) -> list:
        return [self.probe(prompt) for prompt in self.prompts]

    def probe(self, prompt: np.ndarray) -> dict:
        """One prompt: its greedy continuation and the self-attention over both, (layers, heads, T, T)."""
        model, tokenizer = self.trainer.model, self.trainer.data.tokenizer
        new = list(generate(model, prompt, self.new_tokens, temperature=0.0))
        ids = np.concatenate([prompt, np.asarray(new, dtype=prompt.dtype)])
        weights = model.attention_maps(ids)
        tokens = [token_label(tokenizer.decode([int(i)])) for i in ids]
        return {"input": tokenizer.decode(prompt), "output": tokenizer.decode(new), "source": tokens,
                "target": tokens, "attention": np.round(weights.astype(float), 3).tolist()}
