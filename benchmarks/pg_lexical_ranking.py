"""PostgreSQL's full-text ranking on LoCoMo dev, leave one conversation out: the per-word ``ts_rank``
x the word's inverse document frequency over the user's rows (``sql.lexical_candidates``) at each
length normalisation of ``ts_rank`` (0: none, 1: log2(1 + length), 2: length), against the ranking
before it (one ``ts_rank_cd`` of the OR-ed words, no word weights). The whole default search
(vectors, fusion, re-ranking) as shipped around it; one pgserver database holds the four users.

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/pg_lexical_ranking.py \\
        --data ../shared/data/locomo/locomo_dev.json [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any, Callable

import psycopg
from psycopg import sql

from navi_memory import MemoryStore
from navi_memory.backends.base import Filters
from navi_memory.backends.postgres import sql as q
from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import questions, score, search_depth, store_turns
from navi_memory.bench.locomo_loo import _line, folds_lines, leave_one_out, pooled
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder
from navi_memory.progress import Progress

SHIPPED = q.lexical_candidates


def before(f: Filters, terms: list[str], k: int, match: list[str] | None = None, match_all: bool = False,
           wide: bool = False, sample: int = 0) -> tuple[sql.Composed, list[Any]]:
    """The ranking until 2026-11-28: ts_rank_cd of the OR-ed words, every word alike."""
    cond, params = q.where(f)
    text = sql.SQL(
        "SELECT {}, ts_rank_cd(i.content_tsv, websearch_to_tsquery('english', %s)) AS score FROM items i"
        " WHERE i.content_tsv @@ websearch_to_tsquery('english', %s) AND {} ORDER BY score DESC, i.id LIMIT %s"
    ).format(q.WIDE_SELECT if wide else sql.SQL("i.id"), cond)
    selecting = match or terms
    return text, [" or ".join(terms), (" " if match_all else " or ").join(selecting), *params, k]


def normalised(n: int) -> Callable[..., tuple[sql.Composed, list[Any]]]:
    def candidates(*args: Any, **kwargs: Any) -> tuple[sql.Composed, list[Any]]:
        q.RANK_NORMALIZATION = n
        return SHIPPED(*args, **kwargs)
    return candidates


SETTINGS = {"before: ts_rank_cd": before, **{f"idf x ts_rank, normalisation {n}": normalised(n) for n in (0, 1, 2)}}


def measure(url: str, samples: list[dict[str, Any]], cache: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``{setting: {user: [{category, score}]}}``: every question searched once per setting."""
    settings = Settings(url=url, embeddings="local")
    embedder = embed_cache.cached(resolve_embedder("local", settings), cache)
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in SETTINGS}
    with MemoryStore.open(url, embedder, settings=settings, reranker=False) as store:
        store_turns(store, samples)
        with psycopg.connect(url, autocommit=True) as conn:  # the row budget's estimates, as autovacuum leaves them
            conn.execute("ANALYZE items")
        asked = [(s["sample_id"], question) for s in samples for question in questions(s)]
        progress = Progress("searches", len(asked) * len(SETTINGS))
        done = 0
        for name, candidates in SETTINGS.items():
            q.lexical_candidates = candidates  # type: ignore[assignment]
            try:
                for user, question in asked:
                    found = store.search(question["question"], user_id=user, limit=search_depth(), min_score=0)
                    ranked = [r.metadata.get("dia_id", "") for r in found]
                    rows[name].setdefault(user, []).append(
                        {"category": question["category"], "score": score(ranked, question["evidence"])})
                    done += 1
                    progress(done)
            finally:
                q.lexical_candidates, q.RANK_NORMALIZATION = SHIPPED, 1
        progress.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--db", help="an empty PostgreSQL database with pgvector (default: a pgserver in a temp dir)")
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    users = [s["sample_id"] for s in samples]
    with tempfile.TemporaryDirectory(prefix="navi-pg-lexical-") as tmp:
        server = None
        if args.db is None:
            import pgserver

            server = pgserver.get_server(tmp, cleanup_mode="stop")
        try:
            rows = measure(args.db or server.get_uri(), samples, args.cache)
        finally:
            if server is not None:
                server.cleanup()
    report: dict[str, Any] = {name: pooled([r for u in users for r in by_user[u]]) for name, by_user in rows.items()}
    print(f"  {'':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4")
    for name in SETTINGS:
        print(_line(name, report[name]))
    loo = leave_one_out({name: rows[name] for name in SETTINGS if name != "before: ts_rank_cd"}, users)
    report["leave_one_out over the normalisation"] = loo
    print("\n".join(folds_lines("leave one out over the normalisation", loo)))
    if args.json_out:
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
