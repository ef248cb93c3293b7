"""The GPT's training configuration under nanoGPT's names (GPTTrainConfig, checked once, here), and what a
resumed run keeps from its checkpoint (RESUME_FIXED) or takes from each invocation (PER_INVOCATION)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from tinygrad_lite.checks import int_at_least, number, one_of, positive_int, probability

from .model import GPTConfig
from .tokenizers import TOKENIZERS

TRAINING_FORMAT = "tinygrad-lite-gpt-training/1"  # checkpoint.safetensors: the run, resumable


OPTIMIZERS = ("muon", "adamw")


class GPTTrainingError(ValueError):
    """Data or a checkpoint the run cannot use: the message says which and what to do."""


@dataclass
class GPTTrainConfig:
    """Every setting of a run and its default, in this one place, under nanoGPT's names. The model is
    nanoGPT's for a CPU ("I only have a macbook": 4 layers, 4 heads, 128 wide, no bias, dropout 0, β2
    0.99, clipping at 1); for a 10-minute budget on one core, Muon for the blocks' matrices, a
    128-token context in batches of 16 and AdamW's lr 3e-3 -> 3e-4 learn more than nanoGPT's AdamW
    alone, 64 tokens, batches of 12 and 1e-3 (tiny Shakespeare's whole val split after 10 CPU-minutes:
    1.507, against 1.607 with AdamW alone at 128 x 8 and 1.658 at 64 x 12; docs/gpt.md). nanoGPT's
    recipe is these flags away: --optimizer adamw --block-size 64 --batch-size 12 --learning-rate 1e-3
    --min-lr 1e-4. The run ends at max_iters or when `minutes` (the whole run, evaluations included)
    are spent, whichever comes first; None means no time limit."""
    data: str | None = None          # a UTF-8 text file; None: the built-in text (transformer.gpt.text)
    val: str | None = None           # a validation file; None: the last 10% of data
    out: str = "runs/gpt"
    resume: bool = False
    minutes: float | None = 10.0
    seed: int = 0
    threads: int | None = None       # BLAS + Numba; None: the process's choice, else 1
    tokenizer: str = "char"          # "char" or "bpe"
    vocab_size: int | None = None    # bpe's vocabulary size (None: 1024); char's is the text's characters
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 128
    dropout: float = 0.0
    bias: bool = False
    batch_size: int = 16
    max_iters: int = 100_000
    optimizer: str = "muon"          # "muon": Muon for the blocks' matrices, AdamW for the rest; "adamw": nanoGPT's
    learning_rate: float = 3e-3      # AdamW's (all parameters, or with Muon the embeddings and gains)
    muon_lr: float = 0.02            # Muon's, scaled through the run as learning_rate is
    decay_lr: bool = True
    warmup_iters: int = 100
    lr_decay_iters: int | None = None  # the cosine ends here; None: with the run (the --minutes budget, else max_iters)
    min_lr: float = 3e-4
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0           # 0: no clipping
    eval_interval: int = 250
    eval_iters: int = 20
    average: int = 0                 # at the end also try the mean of the weights at the last N evaluations
    compile: bool = True             # the step, loss to optimizer step, as a compiled plan; False: eager (--no-compile)

    def __post_init__(self):
        op = "GPTTrainConfig"
        for name in ("batch_size", "max_iters", "eval_interval", "eval_iters"):
            setattr(self, name, positive_int(op, name, getattr(self, name)))
        if self.lr_decay_iters is not None:
            self.lr_decay_iters = positive_int(op, "lr_decay_iters", self.lr_decay_iters)
        self.seed = int_at_least(op, "seed", self.seed, 0)
        self.warmup_iters = int_at_least(op, "warmup_iters", self.warmup_iters, 0)
        self.average = int_at_least(op, "average", self.average, 0)
        self.threads = None if self.threads is None else positive_int(op, "threads", self.threads)
        self.minutes = None if self.minutes is None else number(op, "minutes", self.minutes, 0, low_open=True)
        self.learning_rate = number(op, "learning_rate", self.learning_rate, 0, low_open=True)
        self.min_lr = number(op, "min_lr", self.min_lr, 0, self.learning_rate)
        for name in ("weight_decay", "grad_clip"):
            setattr(self, name, number(op, name, getattr(self, name), 0))
        for name in ("beta1", "beta2"):
            setattr(self, name, probability(op, name, getattr(self, name), allow_one=False))
        one_of(op, "tokenizer", self.tokenizer, TOKENIZERS)
        one_of(op, "optimizer", self.optimizer, OPTIMIZERS)
        self.muon_lr = number(op, "muon_lr", self.muon_lr, 0, low_open=True)
        if self.vocab_size is not None:
            if self.tokenizer == "char":
                raise ValueError(f"{op}: vocab_size is the bpe tokenizer's; a char tokenizer's vocabulary is the "
                                 f"text's characters (got vocab_size={self.vocab_size!r})")
            self.vocab_size = int_at_least(op, "vocab_size", self.vocab_size, 256)
        if self.decay_lr and self.lr_decay_iters is not None and self.lr_decay_iters <= self.warmup_iters:
            raise ValueError(f"{op}: lr_decay_iters ({self.lr_decay_iters}) must exceed warmup_iters "
                             f"({self.warmup_iters}): the cosine decays from one to the other")
        self.model_config(vocab_size=1)  # the model's fields, checked by GPTConfig

    def model_config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(vocab_size=vocab_size, block_size=self.block_size, n_layer=self.n_layer,
                         n_head=self.n_head, n_embd=self.n_embd, dropout=self.dropout, bias=self.bias)

    def to_dict(self) -> dict:
        return asdict(self)


# what --resume cannot change: the model, the data, the tokenizer and the streams of batches
RESUME_FIXED = ("data", "val", "seed", "tokenizer", "vocab_size", "optimizer", "n_layer", "n_head", "n_embd",
                "block_size", "bias", "batch_size")


PER_INVOCATION = ("out", "resume", "threads", "compile")  # never taken from the checkpoint
