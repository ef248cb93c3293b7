"""A trained Chinese→English translator: the model, both vocabularies, and how to
tokenize — saved together in one safetensors checkpoint (no pickle, atomic writes).

Checkpoint layout: tensors `model.<param name>` and `optim.<...>`; the JSON metadata
holds the model config, both vocabularies, the training state (step, epoch, RNG) and
the optimizer/scheduler scalars.
"""
from __future__ import annotations

import os
import re
import warnings

import numpy as np

from tinygrad_lite import no_grad
from tinygrad_lite.checkpoint import load, pack_arrays, save
from tinygrad_lite.threads import use_num_threads

from .data import Vocab, contains_cjk, detokenize_en, tokenize_en, tokenize_zh
from .decoding import beam_search, beam_search_batch, greedy_decode, sample_decode
from .fast.decoder_steps import decoder_steps
from .model import Transformer, TransformerConfig

FORMAT = "tinygrad_lite.translator/1"
SENTENCE_END = "。？！.?!"
# a sentence: up to Chinese 。？！, or Western .?! not inside a number or word ("3.5"), with any
# closing quotes or brackets after it
SENTENCE = re.compile(r'.+?(?:[。？！]+|[.?!]+(?![0-9A-Za-z])|$)[”’"』」）)]*')


class TranslatorError(ValueError):
    """A checkpoint or input the translator cannot use; the message says why."""


def _check_config_fits(config: TransformerConfig, arrays: dict) -> None:
    """Refuse, before allocating anything, a config whose model needs more weights than the file
    holds: a hostile or corrupt header must not make us build a terabyte-sized model. The bound
    counts the embeddings and every layer's attention and feed-forward matrices (Figure 1):
    (V_src + V_tgt)·d_model + N·(12·d_model² + 4·d_model·d_ff)."""
    c = config
    needed = (c.src_vocab + c.tgt_vocab) * c.d_model + c.N * (12 * c.d_model ** 2 + 4 * c.d_model * c.d_ff)
    held = sum(a.size for k, a in arrays.items() if k.startswith("model."))
    if needed > held:
        raise ValueError(f"its config asks for a model of at least {needed:,} weights but the file holds "
                         f"only {held:,}")


def _check_beam(beam) -> None:
    if not isinstance(beam, (int, np.integer)) or beam < 1:
        raise TranslatorError(f"translate: beam must be an int >= 1, got {beam!r}")


class Translator:
    def __init__(self, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, lowercase: bool = True,
                 max_train_len: int | None = None, complete_punctuation: bool = False,
                 min_freq: int | None = None):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.min_freq = min_freq  # the vocabulary kept tokens seen this often in training (None: unknown)
        use_num_threads(op="translate")  # 1 unless chosen (set_num_threads, $TINYGRAD_LITE_NUM_THREADS): as Trainer
        self.lowercase = lowercase
        self.max_train_len = max_train_len
        self.complete_punctuation = complete_punctuation

    # ------------------------------------------------------------ save / load
    def save(self, path, train_state: dict | None = None, optimizer=None, scheduler=None) -> None:
        arrays = {f"model.{k}": v for k, v in self.model.state_dict().items()}
        meta = {"format": FORMAT, "config": self.model.config.to_dict(),
                "src_vocab": self.src_vocab.to_dict(), "tgt_vocab": self.tgt_vocab.to_dict(),
                "lowercase": self.lowercase, "max_train_len": self.max_train_len,
                "complete_punctuation": self.complete_punctuation, "min_freq": self.min_freq,
                "train": pack_arrays(train_state or {}, "train", arrays)}
        if optimizer is not None:
            meta["optimizer"] = pack_arrays(optimizer.state_dict(), "optim", arrays)
        if scheduler is not None:
            meta["scheduler"] = pack_arrays(scheduler.state_dict(), "sched", arrays)
        save(arrays, path, metadata=meta)

    @classmethod
    def load(cls, path, with_state: bool = False):
        """Load a checkpoint; with_state=True also returns (metadata, arrays) for resuming."""
        if not os.path.exists(path):
            raise TranslatorError(f"checkpoint {path} does not exist (train one with "
                                  "`python -m transformer train`)")
        arrays, meta = load(path)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise TranslatorError(f"checkpoint {path} is not a translator checkpoint "
                                  f"(format {meta.get('format') if isinstance(meta, dict) else None!r}, "
                                  f"expected {FORMAT!r})")
        try:
            config = TransformerConfig.from_dict(meta["config"])
            _check_config_fits(config, arrays)
            model = Transformer(config)
            weights = {k[len("model."):]: v for k, v in arrays.items() if k.startswith("model.")}
            model.load_state_dict(weights, strict=True)
            src_vocab, tgt_vocab = Vocab.from_dict(meta["src_vocab"]), Vocab.from_dict(meta["tgt_vocab"])
        except (KeyError, TypeError, ValueError) as e:
            raise TranslatorError(f"checkpoint {path} does not fit its own config/vocab: {e}") from None
        if len(src_vocab) != config.src_vocab or len(tgt_vocab) != config.tgt_vocab:
            raise TranslatorError(f"checkpoint {path}: vocab sizes {len(src_vocab)}/{len(tgt_vocab)} don't "
                                  f"match the model's {config.src_vocab}/{config.tgt_vocab}")
        model.eval()
        translator = cls(model, src_vocab, tgt_vocab, meta.get("lowercase", True), meta.get("max_train_len"),
                         meta.get("complete_punctuation", False), meta.get("min_freq"))
        if with_state:
            return translator, meta, arrays
        return translator

    # ------------------------------------------------------------ text <-> ids
    def normalize_source(self, sentence: str) -> str:
        """When every training sentence ended in 。/？ (the built-in corpus), add the missing
        one, so "这是一个苹果" reads like the training data's "这是一个苹果。"."""
        sentence = sentence.strip()
        if self.complete_punctuation and sentence and sentence[-1] not in SENTENCE_END:
            question = sentence.endswith(("吗", "呢")) or "什么" in sentence
            sentence += "？" if question else "。"
        return sentence

    def source_ids(self, sentence: str, warn: bool = True) -> np.ndarray:
        if not isinstance(sentence, str) or not sentence.strip():
            raise TranslatorError("translate: the sentence is empty; give some Chinese text")
        tokens = tokenize_zh(self.normalize_source(sentence))
        if not tokens:
            raise TranslatorError(f"translate: {sentence!r} has no tokens after tokenization")
        unknown = self.src_vocab.unknown_tokens(tokens)
        if unknown and warn:
            warnings.warn(f"translate: {self.why_unknown()}, read as <unk>: {' '.join(unknown)}", stacklevel=3)
        if self.max_train_len and len(tokens) > self.max_train_len and warn:
            warnings.warn(f"translate: {len(tokens)} tokens is longer than any training sentence "
                          f"({self.max_train_len}); the sinusoidal encoding still covers it, but quality "
                          "may drop", stacklevel=3)
        return np.array(self.src_vocab.encode(tokens), dtype=np.int64)

    def why_unknown(self) -> str:
        """Why a token is out of the vocabulary, as far as the checkpoint tells: with min_freq > 1
        a token seen in training may have been too rare to keep."""
        if self.min_freq == 1:
            return "never seen in training"
        if self.min_freq:
            return (f"not in the vocabulary (seen fewer than {self.min_freq} times in training, "
                    f"its --min-freq, or never)")
        return "not in the vocabulary"

    def target_text(self, ids) -> str:
        ids = [int(i) for i in ids]
        if self.tgt_vocab.eos_id in ids:
            ids = ids[:ids.index(self.tgt_vocab.eos_id)]
        return detokenize_en(self.tgt_vocab.decode(ids, strip_special=True))

    def _max_len(self, n_src: int) -> int:
        return max(2 * n_src + 10, (self.max_train_len or 0) + 10)

    # ------------------------------------------------------------ translation
    def translate(self, sentence: str, beam: int = 1, sample: bool = False, temperature: float = 1.0,
                  seed: int | None = None, length_penalty: float = 1.0) -> str:
        _check_beam(beam)
        if not temperature > 0:
            raise TranslatorError(f"translate: temperature must be > 0, got {temperature!r}")
        src = self.source_ids(sentence)
        v = self.tgt_vocab
        if sample:
            out = sample_decode(self.model, src, v.bos_id, v.eos_id, temperature, self._max_len(len(src)), seed)[0]
        elif beam > 1:
            out, _, _ = beam_search(self.model, src, v.bos_id, v.eos_id, beam, self._max_len(len(src)),
                                    length_penalty, steps=decoder_steps(self.model))
        else:
            out = greedy_decode(self.model, src, v.bos_id, v.eos_id, self._max_len(len(src)),
                                steps=decoder_steps(self.model))[0][0]
        return self.target_text(out)

    def translate_text(self, text: str, **options) -> str:
        """A line of Chinese as a reader wants it back: each sentence translated on its own
        (translate(), with `options`), then detokenized in sentence case (for_display)."""
        if isinstance(text, str) and not contains_cjk(text) and re.search("[A-Za-z]", text):
            raise TranslatorError(f"translate: {text.strip()[:40]!r} is not Chinese; this model translates "
                                  f"Chinese to English (e.g. python3 -m transformer translate 我喜欢猫)")
        sentences = [s.strip() for s in SENTENCE.findall(text) if s.strip()] if isinstance(text, str) else []
        return " ".join(for_display(self.translate(s, **options)) for s in sentences or [text])

    def translate_batch(self, sentences, batch_size: int = 128, beam: int = 1,
                        length_penalty: float = 1.0) -> list[str]:
        """Translations of many sentences, batched by similar length: greedy, or beam search of
        width `beam` (all beams of a batch decoded together)."""
        _check_beam(beam)
        ids = [self.source_ids(s, warn=False) for s in sentences]
        order = np.argsort([len(i) for i in ids], kind="stable")
        results = [None] * len(ids)
        v = self.tgt_vocab
        if beam > 1:
            batch_size = max(1, batch_size // beam)
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            width = max(len(ids[i]) for i in chunk)
            src = np.full((len(chunk), width), self.model.config.pad_id, dtype=np.int64)
            for row, i in enumerate(chunk):
                src[row, :len(ids[i])] = ids[i]
            if beam > 1:
                out = [tokens for tokens, _, _ in beam_search_batch(self.model, src, v.bos_id, v.eos_id, beam,
                                                                    self._max_len(width), length_penalty,
                                                                    steps=decoder_steps(self.model))]
            else:
                out = greedy_decode(self.model, src, v.bos_id, v.eos_id, self._max_len(width),
                                    steps=decoder_steps(self.model))[0]
            for row, i in enumerate(chunk):
                results[i] = self.target_text(out[row])
        return results

    @no_grad()
    def attention_maps(self, sentence: str) -> dict:
        """Attention weights of a greedy translation: kind -> (weights (L, h, T_q, T_k),
        query tokens, key tokens), for encoder self-, decoder self- and cross-attention."""
        src = self.source_ids(sentence)
        v = self.tgt_vocab
        out, _ = greedy_decode(self.model, src, v.bos_id, v.eos_id, self._max_len(len(src)),
                               steps=decoder_steps(self.model))
        out = [int(t) for t in out[0]]
        if v.eos_id in out:
            out = out[:out.index(v.eos_id) + 1]
        tgt_in = np.array([[v.bos_id] + out[:-1]]) if out else np.array([[v.bos_id]])
        encoder, decoder = self.model.encoder.layers, self.model.decoder.layers
        blocks = {"encoder self-attention": [layer.self_attn for layer in encoder],
                  "decoder self-attention": [layer.self_attn for layer in decoder],
                  "cross-attention": [layer.cross_attn for layer in decoder]}
        for mods in blocks.values():
            for m in mods:
                m.keep_weights = True
        try:
            self.model(src[None], tgt_in)
            src_tokens = self.src_vocab.decode(src, strip_special=False)
            tgt_tokens = self.tgt_vocab.decode(tgt_in[0], strip_special=False)
            queries = {"encoder self-attention": src_tokens, "decoder self-attention": tgt_tokens,
                       "cross-attention": tgt_tokens}
            keys = {"encoder self-attention": src_tokens, "decoder self-attention": tgt_tokens,
                    "cross-attention": src_tokens}
            return {kind: (np.stack([m.weights[0] for m in mods]), queries[kind], keys[kind])
                    for kind, mods in blocks.items()}
        finally:
            for mods in blocks.values():
                for m in mods:
                    m.keep_weights, m.weights = False, None


def load_translator(path) -> Translator:
    return Translator.load(path)


def for_display(text: str) -> str:
    """'i got a lot of books from him .' -> 'I got a lot of books from him.': punctuation attached,
    'i' and each sentence's first letter upper-case. Scores (BLEU, exact match) use the tokens."""
    tokens = ["I" + t[1:] if t == "i" or t.startswith("i'") else t for t in text.split()]
    joined = detokenize_en(tokens, attach_punctuation=True)
    return re.sub(r"(^|[.?!]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), joined)


def normalize_english(text: str, lowercase: bool = True) -> str:
    """The corpus's normal form: tokens joined by single spaces, so exact match compares tokens."""
    return " ".join(tokenize_en(text, lowercase=lowercase))
