"""What a production run adds to the training loop (transformer.loop), one piece a file, each a
transformer.loop.Plugin or a small object a trainer calls, shared by both trainers:

    interrupt.py      Ctrl-C stops the run between two steps, with a checkpoint to resume from
    time_limit.py     the --minutes budget ends the run (transformer.time_budget counts it)
    data_parallel.py  gradients averaged over MPI ranks (tinygrad_lite.distributed)
    divergence.py     a NaN/Inf loss, or one far above its start, stops the run
    averaging.py      the mean of the weights at the last evaluations (checkpoint averaging)
    report.py         what the loop tells whoever watches (the progress bar, --explore's events)

The resume state is transformer.training_state (the translator's) and the GPT's checkpoint.
"""
