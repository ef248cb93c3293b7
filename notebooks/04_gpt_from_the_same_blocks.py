# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4 · A GPT from the same blocks
#
# A GPT (Radford et al. 2018, *Improving Language Understanding by Generative Pre-Training*; 2019,
# *Language Models are Unsupervised Multitask Learners*) is the decoder of *Attention Is All You
# Need* without the encoder: it reads a text and, at every position, predicts the next token.
# `transformer.gpt` builds it from the boxes notebook 3 toured, under the names of Karpathy's
# [nanoGPT](https://github.com/karpathy/nanoGPT). This notebook:
#
# 1. shows that a GPT block is the paper's encoder layer under a causal mask, and computes what
#    the mask guarantees;
# 2. trains a small GPT for about a minute (`MINUTES` below) on tiny Shakespeare, or on the
#    project's own docs when that file is not there;
# 3. samples from it, token by token, at several temperatures and top-k cuts;
# 4. draws what its attention heads look at;
# 5. draws the backprop graph of one training step, one box per module.
#
# Tiny Shakespeare is nanoGPT's first data set (1.1 M characters, from Karpathy's char-rnn). Put it
# next to the repository, at `../shared/data/tinyshakespeare/input.txt`, e.g. with
# `curl -o ../shared/data/tinyshakespeare/input.txt --create-dirs
# https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt`.
# Training writes its checkpoints to a temporary directory that is deleted afterwards.

# %%
import os
import tempfile
from pathlib import Path

import numpy as np
from IPython.display import Pretty, display

import tinygrad_lite as tl
import transformer
from tinygrad_lite import fast
from tinygrad_lite.nn import functional as F
from transformer import causal_mask
from transformer.gpt import GPT, GPTConfig
from transformer.gpt.block import Block
from transformer.gpt.sampling import generate, next_token_probs
from transformer.gpt.text import split
from transformer.gpt.training import GPTTrainConfig, GPTTrainer
from transformer.train import TrainingReport
from viz import draw_graph, plots

tl.set_num_threads(1)  # at these small shapes a second thread gains little (the CLIs default to 1 too)

MINUTES = float(os.environ.get("TINYGRAD_LITE_NOTEBOOK_MINUTES", 1.0))  # the training budget (the tests shrink it)
MODEL = dict(n_layer=2, n_head=4, n_embd=64, block_size=64)  # nanoGPT's CPU recipe is 4, 4, 128, 64
SHAKESPEARE = Path(transformer.__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare" / "input.txt"
DATA = str(SHAKESPEARE) if SHAKESPEARE.is_file() else None  # None: the built-in text (transformer.gpt.text)
print("training text:", DATA or "the built-in text (the project's docstrings and docs)")

# %% [markdown]
# ## 1. The idea: the encoder layer under a causal mask
#
# The paper's decoder layer has three sub-layers: masked self-attention, cross-attention to the
# encoder's output, and the feed-forward network, each inside a residual connection with
# LayerNorm. A GPT has no encoder, so there is nothing to cross-attend to. What is left, masked
# self-attention and the feed-forward network, is the encoder layer (§3.1) with the decoder's
# causal mask (§3.2.3): position `t` may look at tokens `0..t` only, and it predicts token `t+1`.
# In code it is the GPT's own `Block`, written as nanoGPT's: the paper's `MultiHeadAttention` and
# the feed-forward network (an `MLP`, with GELU), each a residual branch with LayerNorm in front.
#
# nanoGPT's names and the paper's:
#
# | nanoGPT | the paper | here |
# |---|---|---|
# | `n_layer` | N, the number of layers | `GPTConfig.n_layer`, `len(model.blocks)` |
# | `n_head` | h, heads per attention | `n_head`; d_k = d_v = `n_embd / n_head` |
# | `n_embd` | d_model | `n_embd` |
# | `4 * n_embd` | d_ff, the feed-forward's inner size | `config.d_ff` |
# | `block_size` | (the longest sequence) | `block_size`: the context, the positions there are |
# | `dropout` | P_drop | `dropout` |
# | `wte`, `wpe` | embeddings; positional encoding (sinusoids, §3.5) | `token_embedding`, `position_embedding` |
# | `h[i]` (a `Block`) | an encoder layer under a causal mask | `blocks[i]`, a `Block` (`transformer/gpt/block.py`) |
# | `ln_f` | (none: its post-LN layers end in a LayerNorm already) | `norm` |
# | `lm_head`, tied to `wte` | the final linear layer, sharing the embedding matrix (§3.4) | `token_embedding.weight` |
#
# Three choices follow GPT-2 rather than the paper, each an option of `GPTConfig`: LayerNorm
# before each sub-layer (pre-LN, `norm_first`), GELU instead of ReLU (`activation`) and learned
# positions (`positions`: `wpe` is learned, not the sinusoids).

# %%
tl.manual_seed(0)
vocab_size = 65  # tiny Shakespeare has 65 distinct characters
gpt = GPT(GPTConfig(vocab_size=vocab_size, **MODEL))
print(gpt.extra_repr())
print("blocks[0] is a Block:", isinstance(gpt.blocks[0], Block))
print(gpt.blocks[0])
print(f"{gpt.num_params():,} parameters (nanoGPT counts them without the position embeddings)")
print("causal_mask(6), True = may attend:")
print(causal_mask(6)[0, 0].astype(int))

# %% [markdown]
# What the mask guarantees: the logits at position `t` depend on tokens `0..t` only. Change every
# token after `t` and the logits at `0..t` stay the same, while those after `t` move. Without the
# mask (the encoder as the paper uses it, every position seeing every position) the first
# position's logits move too: a model trained like that could read the answer off its input.

# %%
rng = np.random.default_rng(0)
ids = rng.integers(0, vocab_size, size=(1, 12))
base = gpt(ids).data
for t in range(ids.shape[1] - 1):
    changed = ids.copy()
    changed[0, t + 1:] = (ids[0, t + 1:] + rng.integers(1, vocab_size, size=ids.shape[1] - t - 1)) % vocab_size
    logits = gpt(changed).data
    np.testing.assert_allclose(logits[0, :t + 1], base[0, :t + 1], atol=1e-6)
    assert np.abs(logits[0, t + 1:] - base[0, t + 1:]).max() > 1e-3
print("changed the tokens after t, for t = 0..10: the logits at 0..t never moved, the later ones always did")


def logits_without_mask(model, ids):
    """GPT.forward with no mask: every block as the paper's encoder layer."""
    x = model.embed(ids)
    for block in model.blocks:
        x = block(x)
    return F.linear(model.norm(x), model.token_embedding.weight).data


changed = ids.copy()
changed[0, 1:] = (ids[0, 1:] + 1) % vocab_size
moved = np.abs(logits_without_mask(gpt, changed)[0, 0] - logits_without_mask(gpt, ids)[0, 0]).max()
print(f"without the mask, changing tokens 1..11 moves position 0's logits by up to {moved:.3f}")
assert moved > 1e-3

# %% [markdown]
# ## 2. Train it
#
# `GPTTrainer` runs nanoGPT's `train.py` loop: random windows of `block_size` characters, the
# next-token cross-entropy, gradient clipping at 1, a linear warmup and then a cosine decay of the
# learning rate that ends when the time budget is spent. Every `eval_interval` iterations it
# estimates the loss on both splits (the first 90% of the text trains, the last 10% validates).
# The blocks' weight matrices learn with Muon, which makes each step orthogonal so that every
# direction of a matrix moves alike (`tinygrad_lite.optim.Muon`); the embeddings and gains with
# AdamW. `optimizer="adamw"` gives nanoGPT's AdamW for all, which needs about three times the steps.
#
# The model here is smaller than nanoGPT's CPU recipe (2 layers, 64 wide, instead of 4 and 128)
# with a higher learning rate for AdamW's part (6e-3 instead of 1e-3): in one minute that learns more. The loop
# reports through a callback; this one keeps every batch's loss and prints the evaluation lines.

# %%
class LossCollector(TrainingReport):
    """Keeps the loss of every training batch; TrainingReport.write prints the evaluations."""

    def __init__(self):
        self.records = []

    def step(self, trainer, loss, tokens_per_s):
        self.records.append({"iter": trainer.iter - 1, "batch_loss": loss})


report = LossCollector()
with tempfile.TemporaryDirectory() as out:
    config = GPTTrainConfig(data=DATA, out=out, minutes=MINUTES, threads=1, **MODEL, learning_rate=6e-3,
                            min_lr=6e-4, eval_interval=100, eval_iters=10)
    trainer = GPTTrainer(config, report)
    summary = trainer.run()
    evaluations = plots.read_metrics(trainer.metrics_path)  # what it logged to metrics.jsonl
model, tokenizer = trainer.model, trainer.data.tokenizer
print(f"{summary['iters']:,} iterations in {summary['seconds']:.0f} s; best val loss {summary['best_val_loss']:.3f} "
      f"(a uniform guess over {tokenizer.vocab_size} tokens scores ln {tokenizer.vocab_size} = "
      f"{np.log(tokenizer.vocab_size):.3f})")
display(plots.plot_loss_curves(report.records + evaluations, keys=("batch_loss", "train_loss", "val_loss"),
                               x_key="iter", title="a GPT learning its text",
                               labels={"batch_loss": "loss of each training batch",
                                       "train_loss": "train loss (estimate)", "val_loss": "val loss (estimate)"}))

# %% [markdown]
# `python -m transformer gpt train` is the same loop with nanoGPT's 4-layer model for ten minutes,
# a progress bar, and the files kept in `runs/gpt` (docs/gpt.md).
#
# ## 3. Sample
#
# The model gives the next token's logits; `next_token_probs` turns them into the distribution a
# token is drawn from: `softmax(logits / temperature)`, then only the `top_k` most probable tokens
# kept. Temperature 0 is greedy (always the most probable token); below 1 the distribution
# sharpens, above 1 it flattens. The next character after `CONTEXT`, under four settings:

# %%
PROMPT = "ROMEO:" if DATA else "The model"
CONTEXT = PROMPT + "\nTh"
SETTINGS = {"greedy": dict(temperature=0), "T 0.8, top-k 5": dict(temperature=0.8, top_k=5),
            "T 1": dict(temperature=1.0), "T 1.5": dict(temperature=1.5)}
logits = model(tokenizer.encode(CONTEXT)[None]).data[0, -1]  # (vocab_size,): the next token's scores
shown = {name: next_token_probs(logits, **s) for name, s in SETTINGS.items()}
print(f"the token after {CONTEXT!r}, its probability under each setting:")
print("next  " + "".join(f"{name:>16}" for name in SETTINGS))
for token in np.argsort(-shown["T 1"])[:8]:
    print(f"{tokenizer.decode([int(token)])!r:5} " + "".join(f"{p[token]:16.3f}" for p in shown.values()))

# %% [markdown]
# `generate` yields one token at a time (it feeds the prompt once, then each new token through the
# key/value cache), so the text can be shown as it is drawn: one output, updated in place at each
# token. The same seed draws the same text.

# %%
def stream(output, above, prompt, max_new_tokens=200, seed=0, **sampling):
    """Draw a sample token by token and show `above`, the prompt and the text so far in `output`
    (a display updated in place); returns the whole text shown."""
    decoder = tokenizer.decoder()  # holds back a character whose bytes span several tokens (bpe)
    text = above + prompt
    for token in generate(model, tokenizer.encode(prompt), max_new_tokens, seed=seed, **sampling):
        text += decoder.push(token)
        output.update(Pretty(text))
    text += decoder.flush() + "\n"
    output.update(Pretty(text))
    return text


samples, so_far = display(Pretty(""), display_id=True), ""
for name, sampling in SETTINGS.items():
    so_far = stream(samples, so_far + f"---------- {name}\n", PROMPT, **sampling)

# %% [markdown]
# Greedy text soon repeats itself; a high temperature spells badly; in between the text looks
# most like the training text. After one minute the model knows the shape of the text (names,
# line breaks, short words) more than its words: `python -m transformer gpt train` for ten minutes
# writes much better.
#
# ## 4. What the heads look at
#
# `GPT.attention_maps(ids)` returns every block's and head's causal self-attention weights for one
# sequence, `(n_layer, n_head, T, T)`: row `t` is what position `t` looks at among `0..t`, zero
# above the diagonal. Here for the first 12 characters of a speech in the validation text; one row
# per block, one column per head.

# %%
val_text = split(trainer.data.text, 0.9)[1]
start = val_text.index("\n\n") + 2
text = val_text[start:start + 12]
ids = tokenizer.encode(text)
weights = model.attention_maps(ids)
VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥"}
tokens = ["".join(VISIBLE.get(ch, ch) for ch in tokenizer.decode([int(i)])) for i in ids]
assert np.allclose(np.triu(weights, 1), 0)
display(plots.plot_attention(weights, tokens, title=repr(text), kind="causal self-attention",
                             layer_names=[f"block {i}" for i in range(len(weights))], dpi=60))

# %% [markdown]
# Each head's average weight on the token itself, on the token before it, and on the first token:

# %%
T = len(ids)
print("block head   itself  previous  first")
for layer, heads in enumerate(weights):
    for head, w in enumerate(heads):
        print(f"{layer:5d} {head:4d}   {np.diag(w).mean():6.2f}  {np.diag(w, -1).mean():8.2f}  {w[1:, 0].mean():5.2f}")

# %% [markdown]
# ## 5. The backprop graph of one training step
#
# One window of 16 tokens, the loss, `backward()`, recorded under `fast.plain()` (every speed trick
# off: the graph is the formula, op by op). `collapse=2` draws the embeddings, each block's
# attention, Add & Norm and feed-forward as one box with its shapes, parameter count and the norm
# of its parameters' gradients, coloured from blue (small) to red (large).

# %%
window = tokenizer.encode(val_text[:200])[:17][None]
model.train()
with fast.plain(), tl.retain_grads():
    loss = model.loss(window[:, :-1], window[:, 1:])
    model.zero_grad()
    loss.backward(retain_graph=True)
graph = draw_graph(loss, model=model, collapse=2, rankdir="TB")
print(graph.stats)
display(graph)

# %% [markdown]
# To step through this backward pass node by node, each op's local rule beside the gradients the
# engine computed, run `explore(loss, model, depth=2)` in a new cell (`from viz import explore`):
# an offline page shown inline, about 2 MB, which `.save("step.html")` keeps. (It reads the graph
# that `backward(retain_graph=True)` left above.) From a terminal,
# `python -m viz explore gpt --out runs/gpt_step.html` writes the page for a small GPT, and
# `python -m viz explore --checkpoint runs/gpt/best.safetensors --out runs/my_gpt.html` for one that
# `python -m transformer gpt train` wrote.
