"""The step compiler: `step = compile(fn)` captures a training step once and replays it.

The machinery's home, off the reading path: the paper's boxes and the ops stay the plain formulas, and
this reads the program they make. capture.py runs a step once, dry, and writes down each op (a
function of arrays, Tensor._apply), each backward call and gradient sum, and each recorded call (an
optimizer's step, zero_grad, clipping); plan.py turns that into one straight-line function and
replays it, with no Tensor, graph or check made per op; step.py keys plans by signature and
captures anew when an assumption breaks; shapes.py lets a plan serve the shapes a second capture
showed it does not depend on, or on which only constants that grow with them do (compile(fn,
any_shape=True)); rules/ names groups of plain ops (attention, the FFN's linear -> ReLU -> dropout, the
residual's x + dropout(s)) that a second capture runs as one fused op, and rules/skip_padding.py the
rows of a padded batch that a third capture runs the position-wise ops on.
traced.py refuses a step that reads values into Python while it is captured, which a plan would
replay wrong.
"""
from .plan import Plan
from .step import CompiledStep, compile
from .traced import CompileError

__all__ = ["compile", "CompiledStep", "CompileError", "Plan"]
