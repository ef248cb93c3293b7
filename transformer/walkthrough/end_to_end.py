"""§15 of the walkthrough, the article's running example end to end: a trained toy translator
(python -m transformer train) turns 这是一个苹果 into This is an apple."""
from __future__ import annotations

import warnings
from pathlib import Path

from transformer.walkthrough.example import SENTENCE, TRANSLATION
from transformer.walkthrough.printing import check, claim, heading, show

DEFAULT_CHECKPOINT = Path("runs/translator/best.safetensors")
LATEST_CHECKPOINT = Path("runs/translator/checkpoint.safetensors")


# ---------------------------------------------------------------- 15. end to end
def find_checkpoint(checkpoint=None) -> Path | None:
    if checkpoint is not None:
        return Path(checkpoint)
    for candidate in (DEFAULT_CHECKPOINT, LATEST_CHECKPOINT):
        if candidate.is_file():
            return candidate
    return None


def section_translate(figures=None, checkpoint=None) -> dict:
    heading(15, "端到端翻译", "End to end: translate the sentence", "Transformer")
    claim(f"贯穿全文的例子：把“{SENTENCE}”译成“{TRANSLATION}”",
          f"the running example: translate {SENTENCE} into {TRANSLATION}")
    path = find_checkpoint(checkpoint)
    if path is None:
        show("no checkpoint", f"{DEFAULT_CHECKPOINT} does not exist; train the toy translator with "
             "`python -m transformer train` (minutes on a CPU), then rerun with --checkpoint PATH")
        return {"checkpoint": None, "translation": None}
    from transformer.translator import Translator
    translator = Translator.load(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        translation = translator.translate(SENTENCE)
    for w in caught:
        show("warning", w.message)
    ok = translation.strip().rstrip(" .").lower() == TRANSLATION.lower()
    check(f"greedy translation ({path})", translation, TRANSLATION, ok)
    files = []
    if figures is not None:
        weights, queries, keys = translator.attention_maps(SENTENCE)["cross-attention"]
        files.append(figures.draw("translation_cross_attention.png", "plot_attention", weights,
                                  keys, queries, kind="cross-attention", title=SENTENCE))
    return {"checkpoint": str(path), "translation": translation, "matches": ok, "files": files}
