"""A GPT from the same blocks: a decoder-only language model built from the paper's boxes.

    model        GPTConfig (nanoGPT's names) and GPT, the stack of masked self-attention blocks
    interop      nanoGPT's state-dict names, and the PyTorch twin for tests and benchmarks
    torch_twin   that twin (imports torch; nothing in the library imports it)
    tokenizers   char (nanoGPT's shakespeare_char) and byte-level BPE tokenizers, saved as JSON
    text         the built-in training text (the project's own docstrings and docs) and the 90/10 split

`python -m transformer gpt train|sample|eval` is the command line (transformer/gpt/cli.py).
"""
from .model import FORMAT, GPT, GPTConfig, attention_mask

__all__ = ["FORMAT", "GPT", "GPTConfig", "attention_mask"]
