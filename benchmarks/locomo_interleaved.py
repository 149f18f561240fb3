"""LoCoMo dev stored the way a multi-tenant service stores conversations: each conversation's turns
arrive in extraction passes of K turns, and the passes of the four users interleave (round robin),
so a session's turns do not have consecutive ids. Then the default search, scored as
``navi-memory bench locomo`` scores it (SQLite, all-MiniLM-L6-v2, the bench's embedding cache).

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_interleaved.py ../shared/data/locomo/locomo_dev.json --pass-turns 4

``--no-pass-context``: the first turn of each pass without the turn before as its context (what
the pipeline stored before 87d525c), to measure that code path too.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from navi_memory import MemoryStore
from navi_memory.bench import embed_cache
from navi_memory.bench.locomo import format_report
from navi_memory.bench.locomo_data import ask, turn_items
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--pass-turns", type=int, default=4, metavar="K")
    parser.add_argument("--no-pass-context", action="store_true")
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="navi-interleaved-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'locomo.db'}"
        settings = Settings(url=url, embeddings="local")
        embedder = embed_cache.cached(resolve_embedder("local", settings), args.cache)
        with MemoryStore.open(url, embedder, settings=settings) as store:
            k = args.pass_turns
            passes = [[items[i:i + k] for i in range(0, len(items), k)] for items in map(turn_items, samples)]
            for number in range(max(len(p) for p in passes)):
                for conversation in passes:
                    if number < len(conversation):
                        batch = conversation[number]
                        if args.no_pass_context:
                            batch[0]["context"] = None
                        store.add_many(batch)
            report = ask(samples, lambda user, question: [
                r.metadata.get("dia_id") for r in store.search(question, user_id=user, limit=20, min_score=0)])
            report["embedding_model"], report["fusion"] = store.embedding_model, "weighted"
    shape = f"passes of {k} turns, interleaved across users"
    print(shape + (", no context on the first turn of a pass" if args.no_pass_context else ""))
    print(format_report(report))


if __name__ == "__main__":
    main()
