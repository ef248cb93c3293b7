"""Scoring a translator on held-out pairs: BLEU and chrF (sacrebleu), and exact match."""
from __future__ import annotations

import numpy as np

from .translator import Translator, normalize_english


def exact_match(hypotheses, references) -> float:
    return float(np.mean([h == r for h, r in zip(hypotheses, references)])) if references else 0.0


def evaluate_translations(translator: Translator, pairs, beam: int = 1,
                          length_penalty: float = 0.6) -> dict:
    """BLEU, chrF (sacrebleu) and exact match of greedy or beam-search translations (batched).
    BLEU of the normal form equals sacrebleu's 13a, lowercased, on detokenized text here."""
    import sacrebleu
    hyps = translator.translate_batch([zh for zh, _ in pairs], beam=beam, length_penalty=length_penalty)
    refs = [normalize_english(en, translator.lowercase) for _, en in pairs]
    hyps_norm = [normalize_english(h, translator.lowercase) for h in hyps]
    return {"bleu": sacrebleu.corpus_bleu(hyps_norm, [refs], tokenize="none", force=True).score,
            "chrf": sacrebleu.corpus_chrf(hyps_norm, [refs]).score,
            "exact_match": exact_match(hyps_norm, refs), "n": len(pairs), "hypotheses": hyps}
