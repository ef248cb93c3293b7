"""The translator's decoding machinery: not a box of the paper's figure, but how it decodes fast.

The plain path it replaces is `model.encode` + `transformer.decoding` (the Tensor decoder with its
key/value cache, CachedSteps), which stays its test oracle. The translator passes decoding the steps
decoder_steps picks; two switches in tinygrad_lite/fast.py pick them:
`TRICKS.decoder_kernel` (these kernels at all) and `TRICKS.decoder_layouts` (the weight layouts and
NumPy's sgemm that they choose by row count).

    decoder_steps.py    the steps the translator decodes with: the kernels' or the textbook's
    decoder_kernel.py   the encoder and each decoder step as Numba kernels; DecoderKernel, which
                        transformer.decoding calls through decoder_steps
    decoder_weights.py  the model's parameters as the kernels read them: stacked, laid out; supports()
    numpy_sgemm.py      NumPy's own float32 GEMM, called from the kernels
    decode_memory.py    memory kept between decodes
    gpt_kernel.py       the GPT's cached forward as one Numba call, for transformer.gpt.sampling
                        (its own switch, `TRICKS.gpt_kernel`)
"""
