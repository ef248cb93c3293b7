"""The article, runnable: the claims of a Chinese beginner's guide to "Attention Is All You
Need", each restated in our own words (Chinese and English) and computed with tinygrad_lite
and the `transformer` package, next to the article's own numbers.

Each section is a function that prints its part and returns a dict of what it computed
(the tests read those dicts); its heading names the article's section the claims come from.
✓/✗ mark a number that matches / misses the article's, ⚠ marks a precision note: where the
article's wording is looser than the maths. run() computes them on the plain path
(tinygrad_lite.fast.plain()), so the numbers shown come from the formulas.

    python -m transformer explain                       # all 15 sections, < 30 s
    python -m transformer explain --section temperature # one section, by name or number
    python -m transformer explain --figures out/        # also write the pictures
    python -m transformer explain --checkpoint runs/translator/best.safetensors

One module per part of the article: networks (§1-2), self_attention (§3-5), softmax (§6-8),
sublayers (§9-11), decoder_attention (§12-13), positions (§14), end_to_end (§15); example holds
the running sentence and the base model's sizes, printing the ✓/✗ lines, sections the order and
run(), cli the command line.

Layering: `transformer` never imports `viz`. The pictures are drawn by a plotting module that
the caller passes in (`Figures(directory, viz.plots)`); the command line, which sits above
both packages, does that for --figures.
"""
from transformer.walkthrough.cli import main
from transformer.walkthrough.decoder_attention import section_causal, section_cross
from transformer.walkthrough.end_to_end import (
    DEFAULT_CHECKPOINT,
    LATEST_CHECKPOINT,
    find_checkpoint,
    section_translate,
)
from transformer.walkthrough.example import (
    D_FF,
    D_MODEL,
    N_LAYERS,
    SENTENCE,
    TRANSLATION,
    H,
    six_token_input,
    softmax64,
    toy_vocab,
)
from transformer.walkthrough.networks import (
    XOR_INPUTS,
    XOR_TARGETS,
    descent_loss,
    gradient_descent,
    section_descent,
    section_xor,
    train_xor,
)
from transformer.walkthrough.positions import boss_output, section_pe, shift_error
from transformer.walkthrough.printing import Figures, matches_printed
from transformer.walkthrough.sections import SECTIONS, run
from transformer.walkthrough.self_attention import (
    ARTICLE_LOOKUP_SCORES,
    ARTICLE_LOOKUP_SOFTMAX,
    section_attention,
    section_embedding,
    section_lookup,
)
from transformer.walkthrough.softmax import (
    ARTICLE_T10_SOFTMAX,
    ARTICLE_TEMPERATURE_LOGITS,
    dot_product_variance,
    section_scaling,
    section_temperature,
    section_xent_grad,
    softmax_input_gradient,
)
from transformer.walkthrough.sublayers import (
    base_model_parameters,
    composed_count,
    section_addnorm,
    section_ffn,
    section_multihead,
)

__all__ = [
    "main", "run", "SECTIONS", "Figures", "matches_printed",
    "SENTENCE", "TRANSLATION", "D_MODEL", "H", "D_FF", "N_LAYERS", "softmax64", "toy_vocab", "six_token_input",
    "XOR_INPUTS", "XOR_TARGETS", "train_xor", "section_xor", "descent_loss", "gradient_descent", "section_descent",
    "ARTICLE_LOOKUP_SCORES", "ARTICLE_LOOKUP_SOFTMAX", "section_embedding", "section_attention", "section_lookup",
    "ARTICLE_TEMPERATURE_LOGITS", "ARTICLE_T10_SOFTMAX", "section_temperature", "dot_product_variance",
    "softmax_input_gradient", "section_scaling", "section_xent_grad",
    "section_multihead", "section_addnorm", "base_model_parameters", "composed_count", "section_ffn",
    "section_causal", "section_cross", "shift_error", "boss_output", "section_pe",
    "DEFAULT_CHECKPOINT", "LATEST_CHECKPOINT", "find_checkpoint", "section_translate",
]
