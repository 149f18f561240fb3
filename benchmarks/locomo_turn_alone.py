"""A design not built: a long turn also read without its context, measured on LoCoMo dev.

A turn's vector is of its previous turn and its text (``core.contract.embedding_text``), which helps a
short reply ("Yes, last week!") and dilutes a long turn that says something on its own. Two ways to
let a long turn (at least ``W`` words) speak for itself, each over a grid, chosen leave one
conversation out with the bench's objective (lexical channel, fusion and re-ranking as shipped):

- **two vectors** (``blend``): the turn keeps its vector and gets one more of its text alone; the
  dense channel scores it ``(1 - b) x with context + b x alone`` (SQLite's channel patched in this
  process, as ``locomo_sentence_vectors.py`` does; a store would need a second vector per long turn);
- **one vector** (``pooled``): the turn's one stored vector is the normalised mean
  ``(1 - b) x with context + b x alone`` (an embedder wrapper; a store would embed a long turn twice
  at write time and keep one vector).

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_turn_alone.py \\
        --data ../shared/data/locomo/locomo_dev.json [--json OUT]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from locomo_sentence_vectors import SentenceChannel, arguments, print_settings, wins_losses  # type: ignore[import-not-found]
from navi_memory import MemoryStore
from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import questions, score, turn_items
from navi_memory.bench.locomo_loo import leave_one_out, pooled
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder
from navi_memory.progress import Progress

WORDS = (24, 32, 40)
WEIGHTS = (0.4, 0.5, 0.6)
SHIPPED = "as shipped"


def words(content: str) -> int:
    """Words of a turn's text without its ``Speaker:`` label."""
    return len(content.split()) - 1


class BlendChannel(SentenceChannel):
    """The dense channel scoring a long turn ``(1 - weight) x with context + weight x alone``."""

    weight = 0.5

    def combine(self, turn: float, alone: float | None) -> float:
        return turn if alone is None else (1 - self.weight) * turn + self.weight * alone


class PooledTurns:
    """An embedder whose vector of a long turn with context (``context\\ntext``) is the normalised
    mean of that text's and the turn's alone (``least`` None: the inner embedder's)."""

    def __init__(self, inner: Any, least: int | None, weight: float) -> None:
        self.inner, self.least, self.weight = inner, least, weight

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = [np.asarray(v, dtype=np.float64) for v in self.inner.embed_documents(texts)]
        if self.least is None:
            return [v.tolist() for v in out]
        long = [i for i, t in enumerate(texts) if "\n" in t and words(t.rsplit("\n", 1)[1]) >= self.least]
        alone = self.inner.embed_documents([texts[i].rsplit("\n", 1)[1] for i in long]) if long else []
        for i, vec in zip(long, alone):
            mean = (1 - self.weight) * out[i] / np.linalg.norm(out[i]) + self.weight * np.asarray(vec) / np.linalg.norm(vec)
            out[i] = mean / np.linalg.norm(mean)
        return [v.tolist() for v in out]


def ask(store: MemoryStore, samples: list[dict[str, Any]], name: str) -> dict[str, list[dict[str, Any]]]:
    """Every dev question searched as the bench does (top 50, ``min_score=0``, scored on the first 20)."""
    asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
    rows: dict[str, list[dict[str, Any]]] = {s["sample_id"]: [] for s in samples}
    progress = Progress(name, len(asked))
    for index, (user, q) in enumerate(asked):
        found = store.search(q["question"], user_id=user, limit=50, min_score=0)[:20]
        rows[user].append({"category": q["category"], "score": score([r.metadata["dia_id"] for r in found], q["evidence"])})
        progress(index + 1)
    progress.close()
    return rows


def ingest(store: MemoryStore, samples: list[dict[str, Any]]) -> dict[str, list[tuple[int, str]]]:
    stored = {}
    for sample in samples:
        items = turn_items(sample)
        ids = [i for start in range(0, len(items), 256) for i in store.add_many(items[start:start + 256])]
        stored[sample["sample_id"]] = list(zip(ids, [it["content"] for it in items]))
    return stored


def blended(samples: list[dict[str, Any]], cache: Path, rows: dict[str, Any]) -> None:
    channel = BlendChannel()
    channel.install()
    with tempfile.TemporaryDirectory(prefix="navi-alone-") as tmp:
        url = f"sqlite:///{tmp}/locomo.db"
        settings = Settings(url=url, embeddings="local")
        embedder = embed_cache.cached(resolve_embedder("local", settings), cache)
        with MemoryStore.open(url, embedder, settings=settings, reranker=False) as store:
            stored = ingest(store, samples)
            rows[SHIPPED] = ask(store, samples, SHIPPED)
            alone = {}
            for user, turns in stored.items():
                texts = [content for _, content in turns]
                vectors = [v for start in range(0, len(texts), 256)
                           for v in store.embed_texts(texts[start:start + 256], user_id=user).vectors]
                alone[user] = (np.array([i for i, _ in turns]), np.asarray(vectors, dtype=np.float32),
                               np.array([words(t) for t in texts]))
            channel.alpha = 1.0  # the parent's switch: the patched channel is on
            for least in WORDS:
                for user, (owners, vectors, lengths) in alone.items():
                    channel.parts[user] = (owners[lengths >= least], vectors[lengths >= least])
                for weight in WEIGHTS:
                    channel.weight = weight
                    name = f"two vectors, turns of {least}+ words, alone {weight:g}"
                    rows[name] = ask(store, samples, name)
            channel.alpha = 0.0


def pooled_vectors(samples: list[dict[str, Any]], cache: Path, rows: dict[str, Any]) -> None:
    for least in WORDS:
        for weight in WEIGHTS:
            with tempfile.TemporaryDirectory(prefix="navi-alone-") as tmp:
                url = f"sqlite:///{tmp}/locomo.db"
                settings = Settings(url=url, embeddings="local")
                inner = embed_cache.cached(resolve_embedder("local", settings), cache)
                with MemoryStore.open(url, PooledTurns(inner, least, weight), settings=settings, reranker=False) as store:
                    ingest(store, samples)
                    name = f"one vector, turns of {least}+ words, alone {weight:g}"
                    rows[name] = ask(store, samples, name)


def report_of(rows: dict[str, dict[str, list[dict[str, Any]]]], names: list[str]) -> dict[str, Any]:
    users = sorted(rows[SHIPPED])
    family = {name: rows[name] for name in [SHIPPED, *names]}
    return {"settings": {name: {**pooled([r for u in users for r in by_user[u]]),
                                "against_shipped": wins_losses(rows[SHIPPED], by_user)}
                         for name, by_user in family.items()},
            "leave_one_out": leave_one_out(family, users)}


def main() -> None:
    args, samples = arguments(__doc__.split("\n")[0])
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    blended(samples, args.cache, rows)
    pooled_vectors(samples, args.cache, rows)
    report = {family: report_of(rows, [n for n in rows if n.startswith(prefix)])
              for family, prefix in (("two_vectors", "two vectors"), ("one_vector", "one vector"))}
    print(f"  {'all dev':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4")
    for family, part in report.items():
        shown = {name: figures for name, figures in part["settings"].items() if family == "two_vectors" or name != SHIPPED}
        print_settings(shown, part["leave_one_out"], f"over {family.replace('_', ' ')}")
    if args.json_out:
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
