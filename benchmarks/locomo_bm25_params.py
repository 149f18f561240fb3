"""SQLite's BM25 parameters on LoCoMo dev, leave one conversation out: k1, b and the previous turn's
column weight (``retrieval.lexical``; the grid's reference is k1 1.2, b 0.75, context 0.3, FTS5's
values, shipped until 2026-11-28: since then k1 0.9, b 0.9, this script's choice). The whole
default search (vectors, fusion, re-ranking) around each setting; the folds choose by the mean of
R@5 and R@10 on the other three conversations (``bench.locomo_loo``).

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_bm25_params.py \\
        --data ../shared/data/locomo/locomo_dev.json [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

from navi_memory import MemoryStore
from navi_memory.backends.sqlite import lexicon
from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import questions, score, search_depth, store_turns
from navi_memory.bench.locomo_loo import _line, choose, folds_lines, leave_one_out, pooled
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder
from navi_memory.progress import Progress
from navi_memory.retrieval import lexical

GRID = {"k1": (0.6, 0.9, 1.2, 1.6, 2.0), "b": (0.3, 0.5, 0.75, 0.9), "context": (0.3, 0.6)}
NARROW = {"k1": (0.6, 0.9, 1.2, 1.6), "b": (0.5, 0.75, 0.9), "context": (0.3,)}  # --narrow
SHIPPED = "k1 1.2, b 0.75, context 0.3"  # the reference "no category lower" compares with (FTS5's)


def apply(k1: float, b: float, context: float) -> None:
    lexical.K1, lexical.B = k1, b
    lexicon._COLUMN_WEIGHT[lexicon.COLUMNS.index("context")] = context


def measure(samples: list[dict[str, Any]], cache: Path,
            grid_of: dict[str, tuple[float, ...]] = GRID) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``{setting: {user: [{category, score}]}}``: every question searched once per setting."""
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="navi-bm25-params-") as tmp:
        url = f"sqlite:///{tmp}/locomo.db"
        settings = Settings(url=url, embeddings="local")
        embedder = embed_cache.cached(resolve_embedder("local", settings), cache)
        shipped = (lexical.K1, lexical.B, float(lexicon._COLUMN_WEIGHT[lexicon.COLUMNS.index("context")]))
        with MemoryStore.open(url, embedder, settings=settings, reranker=False) as store:
            store_turns(store, samples)
            asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
            grid = list(itertools.product(*grid_of.values()))
            progress, done = Progress("searches", len(asked) * len(grid)), 0
            try:
                for k1, b, context in grid:
                    apply(k1, b, context)
                    name = f"k1 {k1:g}, b {b:g}, context {context:g}"
                    for user, q in asked:
                        found = store.search(q["question"], user_id=user, limit=search_depth(), min_score=0)
                        rows.setdefault(name, {}).setdefault(user, []).append(
                            {"category": q["category"],
                             "score": score([r.metadata.get("dia_id", "") for r in found], q["evidence"])})
                        done += 1
                        progress(done)
            finally:
                apply(*shipped)
            progress.close()
    return rows


def no_category_lower(rows: dict[str, dict[str, list[dict[str, Any]]]], users: list[str]) -> dict[str, Any]:
    """Leave one out under issue 36's rule: each fold chooses among the settings that leave no
    category's R@5 or R@10 on its three training conversations below FTS5's setting's (``SHIPPED``)."""
    def recalls(name: str, among: list[str]) -> dict[str, tuple[float, float]]:
        part = pooled([r for u in among for r in rows[name][u]])["per_category"]
        return {c: (p["recall"]["5"], p["recall"]["10"]) for c, p in part.items()}

    folds, held = [], []
    for user in users:
        train = [u for u in users if u != user]
        base = recalls(SHIPPED, train)
        allowed = {name: by_user for name, by_user in rows.items()
                   if all(a >= b - 1e-9 for c, pair in recalls(name, train).items() for a, b in zip(pair, base[c]))}
        chosen = choose(allowed, train)
        folds.append({"held_out": user, "chosen": chosen, **pooled(rows[chosen][user])})
        held.extend(rows[chosen][user])
    return {"folds": folds, **pooled(held)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    parser.add_argument("--json", dest="json_out", default=None)
    parser.add_argument("--narrow", action="store_true", help=f"the grid {NARROW} (FTS5's setting and the shipped one in it)")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    users = [s["sample_id"] for s in samples]
    rows = measure(samples, args.cache, NARROW if args.narrow else GRID)
    report: dict[str, Any] = {"grid": GRID, **{name: pooled([r for u in users for r in by_user[u]])
                                              for name, by_user in rows.items()}}
    print(f"  {'':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4")
    for name in rows:
        print(_line(name + (" (FTS5's)" if name == SHIPPED else ""), report[name]))
    loo = leave_one_out(rows, users)
    report["leave_one_out"] = loo
    print("\n".join(folds_lines("leave one out over k1, b and context", loo)))
    ruled = no_category_lower(rows, users)
    report["leave_one_out_no_category_lower"] = ruled
    print("\n".join(folds_lines("the same, no category of the training folds lower", ruled)))
    if args.json_out:
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
