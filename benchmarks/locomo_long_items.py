"""Long items: each LoCoMo dev session stored as one item (its turns, one a line; median 2,763
characters, where all-MiniLM-L6-v2 reads about 1,000), searched with every dev question; a
question is a hit at k when one of the top k items is a session holding its evidence; and "in the
block" when the memory block a prompt gets (``prompt.relevant_memory_block`` of the top 5, its
default 400 tokens) holds the opening of an evidence turn: as the block is made now (a long
result that does not fit is given as its snippet, the part holding most of the question's words)
and as it was before (such a result left out, the best one cut to its opening). ``--reranker``:
with that second stage (``--questions N``: every k-th dev question, N of them; long pairs are slow). Run once
per ``embedding_passage_chars`` (0: a text embedded whole, as the model reads it; else the mean
of its passages, ``navi_memory.passages``), each in a store of its own (SQLite, MiniLM, the
bench's embedding cache).

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_long_items.py \\
        --data ../shared/data/locomo/locomo_dev.json [--chars 0,500,1000,2000] [--json OUT]
        [--reranker onnx:<folder> --questions 150]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from navi_memory import MemoryStore
from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import CATEGORIES, questions, sessions_of, turn_items
from navi_memory.prompt import escape, relevant_memory_block
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder

KS = (1, 3, 5)
OPENING = 60  # characters of an evidence turn that must be in the block


def session_items(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """One item per session of a conversation: its turns joined, one a line."""
    sessions: dict[int, list[dict[str, Any]]] = {}
    for turn in turn_items(sample):
        sessions.setdefault(turn["metadata"]["session"], []).append(turn)
    return [{"user_id": sample["sample_id"], "content": "\n".join(t["content"] for t in turns),
             "observed_at": turns[0]["observed_at"], "metadata": {"session": number}}
            for number, turns in sorted(sessions.items())]


def hits(ranked: list[int], evidence: list[str]) -> dict[str, float]:
    gold = set().union(*(sessions_of(e) for e in evidence))
    return {f"hit@{k}": 1.0 if gold & set(ranked[:k]) else 0.0 for k in KS}


def in_block(found: list[Any], evidence: list[str], turns: dict[str, str]) -> dict[str, float]:
    """Whether the memory block of ``found`` holds an evidence turn's opening: as made now, and as
    before (a result whose snippet is its content is never given as a snippet: the old rule)."""
    openings = [escape(turns[e], single_line=True)[:OPENING] for e in evidence if e in turns]
    out = {}
    for name, shown in (("block", found), ("block_before", [replace(r, snippet=r.content) for r in found])):
        block = relevant_memory_block(shown[:max(KS)]) or ""
        out[name] = 1.0 if any(o in block for o in openings) else 0.0
    return out


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.mean(r[key] for r in rows), 4) for key in rows[0]}


def run(samples: list[dict[str, Any]], chars: int, cache: Path, tmp: str, reranker: str | None = None,
        every: int = 1) -> dict[str, Any]:
    url = f"sqlite:///{tmp}/sessions-{chars}.db"
    settings = Settings(url=url, embeddings="local", embedding_passage_chars=chars)
    embedder = embed_cache.cached(resolve_embedder("local", settings), cache)
    rows: list[tuple[int, dict[str, float]]] = []
    with MemoryStore.open(url, embedder, settings=settings, reranker=reranker or False) as store:
        for sample in samples:
            store.add_many(session_items(sample))
        turns = {s["sample_id"]: {t["metadata"]["dia_id"]: t["content"] for t in turn_items(s)} for s in samples}
        for sample, q in [(sample, q) for sample in samples for q in questions(sample)][::every]:
            found = store.search(q["question"], user_id=sample["sample_id"], limit=max(KS), min_score=0)
            rows.append((q["category"], {**hits([r.metadata["session"] for r in found], q["evidence"]),
                                         **in_block(list(found), q["evidence"], turns[sample["sample_id"]])}))
    return {"questions": len(rows), **mean([r for _, r in rows]),
            "per_category": {str(c): mean([r for cat, r in rows if cat == c]) for c in CATEGORIES
                             if any(cat == c for cat, _ in rows)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--chars", default="0,500,1000,2000", help="embedding_passage_chars values, comma-separated")
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    parser.add_argument("--json", dest="json_out", type=Path, default=None)
    parser.add_argument("--reranker", default=None, metavar="SPEC", help="a second stage, e.g. onnx:<folder>")
    parser.add_argument("--questions", type=int, default=None, help="every k-th dev question, this many")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    lengths = [len(item["content"]) for sample in samples for item in session_items(sample)]
    asked = sum(len(questions(sample)) for sample in samples)
    every = max(1, asked // args.questions) if args.questions else 1
    report: dict[str, Any] = {"sessions": len(lengths), "median_chars": statistics.median(lengths),
                              "reranker": args.reranker, "every": every, "runs": {}}
    print(f"{len(lengths)} sessions, median {statistics.median(lengths):.0f} characters")
    print(f"  {'passage chars':<14} {'hit@1':>6} {'hit@3':>6} {'hit@5':>6} {'block':>6} {'before':>8}"
          "   hit@1/hit@5 for categories 1 2 3 4")
    with tempfile.TemporaryDirectory(prefix="navi-long-items-") as tmp:
        for chars in (int(c) for c in args.chars.split(",")):
            part = report["runs"][str(chars)] = run(samples, chars, args.cache, tmp, args.reranker, every)
            cats = " ".join(f"{part['per_category'][str(c)]['hit@1']:.3f}/{part['per_category'][str(c)]['hit@5']:.3f}"
                            if str(c) in part["per_category"] else "  -  " for c in CATEGORIES)
            label = "0 (whole)" if chars == 0 else str(chars)
            print(f"  {label:<14} {part['hit@1']:>6.3f} {part['hit@3']:>6.3f} {part['hit@5']:>6.3f}"
                  f" {part['block']:>6.3f} {part['block_before']:>8.3f}   {cats}", flush=True)
    if args.json_out:
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
