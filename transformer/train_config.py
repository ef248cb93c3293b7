"""The translator's training configuration: TrainConfig, whose defaults are the paper's recipe on the
toy corpus (§5.3-5.4), and the real-data recipe (Tatoeba zh-en) that `train --data` starts from."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TrainConfig:
    data: str | None = None          # None: the built-in corpus
    dev: str | None = None
    test: str | None = None
    out: str = "runs/translator"
    epochs: int | None = 10          # None: no epoch cap (--minutes / --max-steps end the run)
    minutes: float | None = None
    max_steps: int | None = None
    seed: int = 0
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    d_ff: int = 256
    dropout: float = 0.1
    label_smoothing: float = 0.1
    lr: float = 1.0                  # multiplies the Noam schedule
    lr_scaling: str = "sqrt"         # K ranks (K batches a step): lr x sqrt(K), "linear" x K, or "none"
    warmup: int = 400
    max_tokens: int = 3000           # tokens per batch, per rank: K ranks train on K batches a step
    clip: float = 1.0
    min_freq: int = 1
    batch_by: str = "padded"         # "target": random batches of max_tokens real target tokens
    bucket_pool: int = 0             # batch_by="target": sort within pools of N batches (0: off)
    tie_embeddings: bool = False     # share the target embedding and the generator (paper §3.4)
    final_norm: bool = False         # a LayerNorm closing each stack, as torch.nn.Transformer has
    embed_init: str = "normal"       # "xavier": embeddings Xavier-uniform, as the PyTorch tutorial
    eval_every: int = 0              # also evaluate on dev every N steps (0: at each epoch's end)
    average: int = 0                 # at the end also try the mean of the last N evaluated weights
    cooldown: float = 0.0            # the lr falls linearly to 0 over this last share of the budget (0: off)
    lowercase: bool = True
    save_every: int = 0              # also checkpoint every N steps (0: per epoch only)
    dev_bleu_size: int = 800
    resume: bool = False
    progress: bool = True
    threads: int | None = None       # BLAS + Numba; None: set_num_threads' or $TINYGRAD_LITE_NUM_THREADS or 1
    compile: bool = True             # the step as a compiled plan, where the rules fuse the plain boxes;
                                     # False: eager, op by op (--no-compile)
    extra: dict = field(default_factory=dict)


# `train --data FILE` without size flags: the recipe for a real corpus of ~27k pairs (Tatoeba
# zh-en), measured in bench/README.md "Real data"; TrainConfig's defaults stay the toy recipe
REAL_DATA_RECIPE = {"d_model": 128, "heads": 4, "layers": 2, "d_ff": 256, "warmup": 400,
                    "max_tokens": 2000, "batch_by": "target", "bucket_pool": 20, "min_freq": 2,
                    "tie_embeddings": True, "clip": 1.0, "label_smoothing": 0.0, "eval_every": 150,
                    "average": 5, "cooldown": 0.3}


def real_data_config(explicit: dict) -> dict:
    """REAL_DATA_RECIPE under the TrainConfig fields set explicitly. The recipe's pools of 20 batches
    were measured for its own batches of 2,000 tokens; with a --max-tokens of one's own, batches stay
    random (pool 0) unless --bucket-pool is given too: sorted pools of small batches learn less per
    step (530 tokens: dev NLL +0.14 at step 400, bench/README.md "Real data")."""
    recipe = dict(REAL_DATA_RECIPE)
    if "max_tokens" in explicit and "bucket_pool" not in explicit:
        recipe["bucket_pool"] = 0
    return {**recipe, **explicit}
