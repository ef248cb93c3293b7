"""The whole training step the compiler tests compile and compare: loss, zero_grad, backward, optional
clipping, the optimizer's step, the loss returned (tests/test_compile_models.py, test_compile_oracle.py)."""
from tinygrad_lite.optim import clip_grad_norm_


def training_step(loss_of, optimizer, parameters=None, clip: float | None = None):
    """step(*batch) -> the loss Tensor, after one optimizer step on loss_of(*batch); with `clip`, the
    gradient norm of `parameters` is clipped first."""
    parameters = list(parameters) if parameters is not None else None

    def step(*batch):
        loss = loss_of(*batch)
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            clip_grad_norm_(parameters, clip)
        optimizer.step()
        return loss
    return step
