"""Which subword tokenizer the GPT uses, by measurement (docs/gpt.md, "Tokenizers: which and why").

    python bench/gpt_tokenizers.py            # tiny Shakespeare and Tatoeba's Chinese side, vocab 512/1024/4096
    python bench/gpt_tokenizers.py --quick    # seconds: 20k characters of each, vocab 300
    python bench/gpt_tokenizers.py --json out.jsonl

Three byte-level-or-equivalent BPEs, each trained on the first 90% of a text (nanoGPT's split):

    tokenizers     HuggingFace's, as transformer.gpt.tokenizers.SubwordTokenizer ships it (byte-level BPE, GPT-2 split)
    sentencepiece  Google's, BPE with byte fallback and every normalisation off (identity rule, no extra
                   whitespace removal, no dummy prefix): as close to exact as it goes
    ours           a small byte-level BPE in pure Python (below): GPT-2's split approximated with `re`,
                   merges learned with incremental pair counts and a heap

Reported: training time and encode throughput (process CPU time, 1 thread; encode: the median of
--repeats over the training part, each with an empty word cache), characters per token on the
held-out 10%, whether decode(encode(x)) == x on the whole text and on a tricky sample (CRLF, tabs,
NUL, emoji with a skin tone, a combining accent, ligatures, full-width letters, U+2581), the installed
size of the library and of the packages it brings that tinygrad-lite does not already need, and whether
the trained tokenizer serialises to JSON (it goes into a safetensors checkpoint's metadata).
"""
from __future__ import annotations

import argparse
import heapq
import io
import os
import re
import sys
import time
from collections import Counter, defaultdict
from importlib import metadata
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_throughput import append_json, markdown, median  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
TRICKY = ("Hello,  world!\r\n\n\tTabs\x00 我有3个iPhone。“引号”😀👍🏽 cafe\u0301 ﬁne ｆｕｌｌ ▁under ⅻ \u200b end  \n")
VOCABS, QUICK_VOCABS = (512, 1024, 4096), (300,)


def texts(quick: bool) -> dict[str, str]:
    """tiny Shakespeare, and the Chinese sentences of Tatoeba's train.txt (English<TAB>Chinese<TAB>attribution)."""
    shakespeare = (DATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    rows = (DATA / "tatoeba-cmn-eng" / "train.txt").read_text(encoding="utf-8").splitlines()
    chinese = "\n".join(row.split("\t")[1] for row in rows) + "\n"
    found = {"tinyshakespeare": shakespeare, "tatoeba-zh": chinese}
    return {name: text[:20_000] for name, text in found.items()} if quick else found


# ---------------------------------------------------------------- a byte-level BPE of our own

SPLIT = re.compile(r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def merged(seq: list[int], pair: tuple[int, int], new: int) -> list[int]:
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and (seq[i], seq[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


class OwnBPE:
    """Byte-level BPE: chunks by GPT-2's split, merges the most frequent pair (ties: the smallest)."""

    def __init__(self, merges: dict[tuple[int, int], int]):
        self.merges = merges
        self.pieces = [bytes([b]) for b in range(256)]
        for (a, b) in merges:
            self.pieces.append(self.pieces[a] + self.pieces[b])
        self.cache: dict[str, list[int]] = {}

    @classmethod
    def train(cls, text: str, vocab_size: int) -> OwnBPE:
        words = Counter(SPLIT.findall(text))
        seqs, counts = [list(w.encode()) for w in words], list(words.values())
        pairs, where = Counter(), defaultdict(set)
        for i, seq in enumerate(seqs):
            for p in zip(seq, seq[1:]):
                pairs[p] += counts[i]
                where[p].add(i)
        heap = [(-c, p) for p, c in pairs.items()]
        heapq.heapify(heap)
        merges = {}
        while len(merges) + 256 < vocab_size and heap:
            count, best = heapq.heappop(heap)
            if pairs.get(best, 0) != -count or count == 0:
                continue
            new = 256 + len(merges)
            merges[best] = new
            changed = set()
            for i in where.pop(best):
                seq, c = seqs[i], counts[i]
                for p in zip(seq, seq[1:]):
                    pairs[p] -= c
                    where[p].discard(i)
                    changed.add(p)
                seqs[i] = seq = merged(seq, best, new)
                for p in zip(seq, seq[1:]):
                    pairs[p] += c
                    where[p].add(i)
                    changed.add(p)
            pairs.pop(best, None)
            for p in changed - {best}:
                if pairs[p] > 0:
                    heapq.heappush(heap, (-pairs[p], p))
        return cls(merges)

    def encode_chunk(self, chunk: str) -> list[int]:
        seq, ranks = list(chunk.encode()), self.merges
        while len(seq) > 1:
            pair = min(zip(seq, seq[1:]), key=lambda p: ranks.get(p, 1 << 30))
            if pair not in ranks:
                break
            seq = merged(seq, pair, ranks[pair])
        return seq

    def encode(self, text: str) -> list[int]:
        ids, cache = [], self.cache
        for chunk in SPLIT.findall(text):
            if chunk not in cache:
                cache[chunk] = self.encode_chunk(chunk)
            ids += cache[chunk]
        return ids

    def decode(self, ids) -> str:
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", errors="replace")


# ---------------------------------------------------------------- the candidates, one interface


def train_hf(text: str, vocab_size: int):
    from transformer.gpt.tokenizers import SubwordTokenizer
    return SubwordTokenizer.train(text, vocab_size)


class SentencePiece:
    def __init__(self, text: str, vocab_size: int):
        import sentencepiece as spm
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter([line for line in text.split("\n") if line]), model_writer=model,
            model_type="bpe", vocab_size=vocab_size, byte_fallback=True, character_coverage=1.0,
            normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=False,
            allow_whitespace_only_pieces=True, bos_id=-1, eos_id=-1, num_threads=1, minloglevel=2)
        self.sp = spm.SentencePieceProcessor(model_proto=model.getvalue())

    def encode(self, text: str):
        return self.sp.encode(text)

    def decode(self, ids) -> str:
        return self.sp.decode(list(ids))


CANDIDATES = {"tokenizers": train_hf, "sentencepiece": SentencePiece, "ours": OwnBPE.train}


def cold(tok):
    """The same tokenizer with an empty word cache (tokenizers and ours cache each chunk's ids):
    encode is timed as a training run does it, once over text it has not seen."""
    if isinstance(tok, OwnBPE):
        return OwnBPE(tok.merges)
    return tok if isinstance(tok, SentencePiece) else type(tok).from_dict(tok.to_dict())
JSON = {"tokenizers": "yes (vocab + merges)", "sentencepiece": "no (binary protobuf; base64 only)",
        "ours": "yes (merges)"}
LIBRARY = {"tokenizers": "tokenizers", "sentencepiece": "sentencepiece", "ours": None}


# ---------------------------------------------------------------- install size


def requirements(name: str) -> set[str]:
    """`name` and every distribution it needs (markers evaluated here, no extras), lower-cased."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    seen, todo = set(), [name]
    while todo:
        dist = canonicalize_name(todo.pop())
        if dist in seen:
            continue
        seen.add(dist)
        try:
            needs = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for line in needs:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def installed_mb(names) -> float:
    total = 0
    for name in names:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        total += sum(p.stat().st_size for f in dist.files or () if (p := Path(dist.locate_file(f))).is_file())
    return total / 1e6


def install_size(candidate: str) -> str:
    library = LIBRARY[candidate]
    if library is None:
        return "0 (part of the project)"
    brought = sorted(requirements(library) - requirements("tinygrad-lite"))
    return f"{installed_mb([library]):.1f} MB; with its {len(brought) - 1} new deps {installed_mb(brought):.1f} MB"


# ---------------------------------------------------------------- measuring


def measure(candidate: str, corpus: str, text: str, vocab_size: int, repeats: int) -> dict:
    train, held_out = text[:int(len(text) * 0.9)], text[int(len(text) * 0.9):]
    row = {"candidate": candidate, "text": corpus, "vocab_size": vocab_size}
    start = time.process_time()
    try:
        tok = CANDIDATES[candidate](train, vocab_size)
    except Exception as e:  # noqa: BLE001 - a candidate that cannot train at this size is a result
        return row | {"error": "fails: " + str(e).split("] ")[-1].splitlines()[0][:100]}
    row["train_s"] = time.process_time() - start
    seconds = []
    for _ in range(repeats):
        tok = cold(tok)
        start = time.process_time()
        ids = tok.encode(train)
        seconds.append(time.process_time() - start)
    row["encode_mchar_s"] = len(train) / median(seconds) / 1e6
    row["chars_per_token"] = len(held_out) / len(tok.encode(held_out))
    row["round_trip_text"] = tok.decode(ids) == train and tok.decode(tok.encode(held_out)) == held_out
    row["round_trip_tricky"] = tok.decode(tok.encode(TRICKY)) == TRICKY
    return row


def table(rows) -> str:
    header = ["candidate", "text", "vocab", "train s", "encode Mchar/s", "chars/token (held out)", "exact: text",
              "exact: tricky"]
    cells = [[r["candidate"], r["text"], r["vocab_size"], *([r["error"], "", "", "", ""] if "error" in r else [
        r["train_s"], r["encode_mchar_s"], r["chars_per_token"], "yes" if r["round_trip_text"] else "**no**",
        "yes" if r["round_trip_tricky"] else "**no**"])] for r in rows]
    return markdown(header, cells)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20k characters of each text, vocab 300")
    parser.add_argument("--repeats", type=int, default=3, help="encode repeats (the median is reported)")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--json", help="append one JSON line per row to this file")
    args = parser.parse_args(argv)
    corpora = texts(args.quick)
    print("- texts: " + ", ".join(f"{name} {len(t):,} characters ({len(set(t)):,} distinct)"
                                  for name, t in corpora.items()))
    print("- CPU time of this process, 1 thread (RAYON_NUM_THREADS=1)\n", flush=True)
    rows = []
    for corpus, text in corpora.items():
        for vocab_size in (QUICK_VOCABS if args.quick else VOCABS):
            for candidate in args.candidates:
                rows.append(measure(candidate, corpus, text, vocab_size, args.repeats))
                append_json(args.json, rows[-1])
                print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    print(table(rows) + "\n")
    print(markdown(["candidate", "installed size", "JSON for the checkpoint"],
                   [[c, install_size(c), JSON[c]] for c in args.candidates]))


if __name__ == "__main__":
    main()
