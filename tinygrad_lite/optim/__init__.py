"""Optimizers (SGD, Adam, AdamW and Muon with PyTorch's exact updates, and several stepped as one),
learning-rate schedules (including the paper's warm-up schedule, NoamLR) and gradient clipping."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .clip import clip_grad_norm_
from .combined import CombinedOptimizer
from .lr_scheduler import CosineAnnealingLR, LambdaLR, LRScheduler, NoamLR, StepLR
from .muon import Muon
from .optimizer import Optimizer
from .sgd import SGD

__all__ = [
           "SGD",
           "Adam",
           "AdamW",
           "CombinedOptimizer",
           "CosineAnnealingLR",
           "LRScheduler",
           "LambdaLR",
           "Muon",
           "NoamLR",
           "Optimizer",
           "StepLR",
           "clip_grad_norm_",
           "lr_scheduler",
]
