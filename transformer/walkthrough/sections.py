"""The walkthrough's 15 sections in the article's order, and run(): it computes the claims of the
named sections on the plain path (tinygrad_lite.fast.plain(): every trick off, the kernels' NumPy
twins), so every number a learner sees comes from the formulas, not from a fast path."""
from __future__ import annotations

from tinygrad_lite import fast
from transformer.walkthrough.decoder_attention import section_causal, section_cross
from transformer.walkthrough.end_to_end import section_translate
from transformer.walkthrough.networks import section_descent, section_xor
from transformer.walkthrough.positions import section_pe
from transformer.walkthrough.printing import Figures
from transformer.walkthrough.self_attention import section_attention, section_embedding, section_lookup
from transformer.walkthrough.softmax import section_scaling, section_temperature, section_xent_grad
from transformer.walkthrough.sublayers import section_addnorm, section_ffn, section_multihead

SECTIONS = {
    "xor": section_xor, "descent": section_descent, "embedding": section_embedding,
    "attention": section_attention, "lookup": section_lookup, "temperature": section_temperature,
    "scaling": section_scaling, "xent-grad": section_xent_grad, "multihead": section_multihead,
    "addnorm": section_addnorm, "ffn": section_ffn, "causal": section_causal,
    "cross": section_cross,
    "pe": section_pe, "translate": section_translate,
}


def run(names, figures: Figures | None = None, checkpoint=None) -> dict:
    """Run the named sections in order on the plain path; returns name -> that section's results."""
    results = {}
    with fast.plain():
        for name in names:
            kwargs = {"checkpoint": checkpoint} if name == "translate" else {}
            results[name] = SECTIONS[name](figures=figures, **kwargs)
    return results
