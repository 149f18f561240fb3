"""A design not built: a turn's sentences as extra vectors of the dense channel, measured on LoCoMo dev.

A turn's vector is of its previous turn and its text (``core.contract.embedding_text``); a fact
said in one sentence of a long turn is diluted by the rest. Here each turn of at least
``--min-sentences`` sentences also gets one vector per sentence ("Speaker: sentence", no context),
and the dense channel scores a turn ``s + alpha x max(0, best sentence - s)`` (alpha 1: the max of
its vectors), for the candidates it proposes and the scores it gives (SQLite backend, patched in
this process); lexical channel, fusion and re-ranking as shipped. One store, the turns and
sentences embedded once (the bench's embedding cache); each setting searches every dev question
(top 50 as the bench, ``min_score=0``; scored on the first 20); settings chosen leave one conversation out with the bench's objective.
Each setting also ", not when": the questions that ask when (``dates.read_query``) keep the shipped
order; and per category, how many questions rose and fell against the shipped search.

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_sentence_vectors.py \\
        --data ../shared/data/locomo/locomo_dev.json [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from navi_memory import MemoryStore
from navi_memory.backends.sqlite.search import SQLiteSearch
from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import questions, score, turn_items
from navi_memory.bench.locomo_loo import _line, leave_one_out, pooled
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder
from navi_memory.progress import Progress
from navi_memory.retrieval.dates import read_query

ALPHAS = (0.0, 0.2, 0.3, 0.5, 0.7, 1.0)
MIN_SENTENCES = (2, 3)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s*\[shares ")


def sentences(content: str) -> list[str]:
    """``"Speaker: one. Two!"`` -> ``["Speaker: one.", "Speaker: Two!"]`` (a shared photo's caption is one)."""
    speaker, _, body = content.partition(": ")
    return [f"{speaker}: {part.strip()}" for part in _SENTENCE_END.split(body) if len(part.strip()) > 3]


class SentenceChannel:
    """The patched dense channel: per user, the sentence vectors and the item each belongs to."""

    def __init__(self) -> None:
        self.parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.alpha = 0.0
        self._semantic = SQLiteSearch._semantic
        self._scores = SQLiteSearch.semantic_scores

    def best(self, user: str, query: np.ndarray) -> dict[int, float]:
        owners, vectors = self.parts[user]
        best: dict[int, float] = {}
        for item, sim in zip(owners.tolist(), (vectors @ query.astype(np.float32)).tolist()):
            best[item] = max(sim, best.get(item, -1.0))
        return best

    def combine(self, turn: float, sentence: float | None) -> float:
        return turn if sentence is None else turn + self.alpha * max(0.0, sentence - turn)

    def install(self) -> None:
        channel = self

        def semantic(search: SQLiteSearch, filters: Any, model: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
            found = dict(channel._semantic(search, filters, model, query, k))
            if channel.alpha == 0 or filters.user_id not in channel.parts:
                return sorted(found.items(), key=lambda kv: -kv[1])[:k]
            best = channel.best(filters.user_id, query)
            proposed = [i for i in sorted(best, key=lambda i: -best[i])[:k] if i not in found]
            if proposed:
                found.update(channel._scores(search, filters, model, query, proposed))
            scored = {i: channel.combine(s, best.get(i)) for i, s in found.items()}
            return sorted(scored.items(), key=lambda kv: -kv[1])[:k]

        def scores(search: SQLiteSearch, filters: Any, model: str, query: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
            found = channel._scores(search, filters, model, query, ids)
            if channel.alpha == 0 or filters.user_id not in channel.parts:
                return found
            best = channel.best(filters.user_id, query)
            return {i: channel.combine(s, best.get(i)) for i, s in found.items()}

        SQLiteSearch._semantic = semantic  # type: ignore[method-assign, assignment]
        SQLiteSearch.semantic_scores = scores  # type: ignore[method-assign, assignment]


def wins_losses(shipped: dict[str, list[dict[str, Any]]], rows: dict[str, list[dict[str, Any]]]
                ) -> dict[str, list[tuple[int, int]]]:
    """Per category: how many questions' R@5 and R@10 rose and fell against the shipped search."""
    out: dict[str, list[tuple[int, int]]] = {}
    pairs = [(b, r) for u in shipped for b, r in zip(shipped[u], rows[u])]
    for category in sorted({b["category"] for b, _ in pairs}):
        moves = []
        for k in ("recall@5", "recall@10"):
            deltas = [r["score"][k] - b["score"][k] for b, r in pairs if b["category"] == category]
            moves.append((sum(d > 1e-9 for d in deltas), sum(d < -1e-9 for d in deltas)))
        out[str(category)] = moves
    return out


def print_settings(settings: dict[str, Any], loo: dict[str, Any], title: str = "(held-out pooled)") -> None:
    """Each setting's figures and moves against as shipped, then the leave-one-out choice."""
    for name, part in settings.items():
        print(_line(name, part))
        print(" " * 4 + "questions up / down against as shipped, R@5 and R@10 by category: " + "  ".join(
            f"{c} {w5}/{l5} {w10}/{l10}" for c, ((w5, l5), (w10, l10)) in part["against_shipped"].items()))
    print(_line(f"leave one out {title}", loo))
    for fold in loo["folds"]:
        print(_line(f"  {fold['held_out']}: {fold['chosen']}", fold))


def arguments(description: str) -> tuple[argparse.Namespace, list[dict[str, Any]]]:
    """The dev scripts' command line (``--data``, ``--cache``, ``--json``) and the conversations."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    parser.add_argument("--json", dest="json_out", type=Path, default=None)
    args = parser.parse_args()
    return args, json.loads(args.data.read_text(encoding="utf-8"))


def main() -> None:
    args, samples = arguments(__doc__.split("\n")[0])
    channel = SentenceChannel()
    channel.install()
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="navi-sentences-") as tmp:
        url = f"sqlite:///{tmp}/locomo.db"
        settings = Settings(url=url, embeddings="local")
        embedder = embed_cache.cached(resolve_embedder("local", settings), args.cache)
        with MemoryStore.open(url, embedder, settings=settings, reranker=False) as store:
            stored: dict[str, list[tuple[int, str]]] = {}
            for sample in samples:
                items = turn_items(sample)
                ids = [i for start in range(0, len(items), 256) for i in store.add_many(items[start:start + 256])]
                stored[sample["sample_id"]] = list(zip(ids, [it["content"] for it in items]))
            for least in MIN_SENTENCES:
                for sample in samples:
                    user = sample["sample_id"]
                    owners, texts = [], []
                    for item_id, content in stored[user]:
                        parts = sentences(content)
                        if len(parts) >= least:
                            owners += [item_id] * len(parts)
                            texts += parts
                    vectors = [v for start in range(0, len(texts), 256)
                               for v in store.embed_texts(texts[start:start + 256], user_id=user).vectors]
                    channel.parts[user] = (np.array(owners), np.asarray(vectors, dtype=np.float32))
                for alpha in ALPHAS:
                    if alpha == 0 and least != MIN_SENTENCES[0]:
                        continue
                    channel.alpha = alpha
                    name = "as shipped (alpha 0)" if alpha == 0 else f"turns of {least}+ sentences, alpha {alpha:g}"
                    rows[name] = {s["sample_id"]: [] for s in samples}
                    asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
                    progress = Progress(name, len(asked))
                    for index, (user, q) in enumerate(asked):
                        found = store.search(q["question"], user_id=user, limit=50, min_score=0)[:20]
                        rows[name][user].append({"category": q["category"], "when": read_query(q["question"]).asks_when,
                                                 "score": score([r.metadata["dia_id"] for r in found], q["evidence"])})
                        progress(index + 1)
                    progress.close()
    users = sorted({s["sample_id"] for s in samples})
    shipped = rows["as shipped (alpha 0)"]
    for name in [n for n in rows if n != "as shipped (alpha 0)"]:  # questions asking when keep the shipped order
        rows[f"{name}, not when"] = {u: [b if b["when"] else r for b, r in zip(shipped[u], rows[name][u])]
                                     for u in users}
    report: dict[str, Any] = {"settings": {name: {**pooled([r for u in users for r in by_user[u]]),
                                                  "against_shipped": wins_losses(shipped, by_user)}
                                           for name, by_user in rows.items()},
                              "leave_one_out": leave_one_out(rows, users)}
    print(f"  {'all dev':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4")
    print_settings(report["settings"], report["leave_one_out"])
    if args.json_out:
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
