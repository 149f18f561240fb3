"""Does bounding the full-text work of large users (``lexical_row_budget``) cost retrieval quality?

LoCoMo's conversations are too small to trigger it (600-700 turns per user). Here each
conversation's user also holds ``--distractors`` synthetic notes (the latency benchmark's
generator: Zipf-distributed words, common English words among them, random ``lowrank`` vectors),
so its common words match thousands of rows. The LoCoMo questions are then asked with each set
of backend options; the distractors are never evidence, so recall measures how much of the
evidence the search still finds. Needs pgserver and all-MiniLM-L6-v2 (offline).

    HF_HUB_OFFLINE=1 python benchmarks/pg_locomo_distractors.py ../shared/data/locomo/locomo_dev.json \
        --distractors 50000 '{}' '{"lexical_row_budget": 0}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

MINILM_DIMENSIONS = 384  # the "local" embedder: all-MiniLM-L6-v2


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import pgserver
    import psycopg

    from navi_memory import MemoryStore
    from navi_memory.bench.data import Corpus, Dataset, Vectors
    from navi_memory.bench.locomo_data import KS, ask, turn_items

    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--distractors", type=int, default=50_000, help="synthetic notes per conversation")
    parser.add_argument("options", nargs="*", type=json.loads, help="backend_options sets (JSON)")
    args = parser.parse_intermixed_args()
    samples = json.loads(Path(args.data).read_text(encoding="utf-8"))
    server = pgserver.get_server(tempfile.mkdtemp(prefix="navi-distractors-"), cleanup_mode="delete")
    url = server.get_uri()
    with MemoryStore.open(url, "local", backend_options={"defer_vector_index": True}) as store:
        model = store.embedding_model
        for number, sample in enumerate(samples):
            items = turn_items(sample)
            store.add_many(items)
            noise = Dataset.create(Corpus(42 + number), args.distractors, "one", 1,
                                   Vectors("lowrank", MINILM_DIMENSIONS, 42 + number), 1, 42 + number)
            for batch in noise.batches(1000):
                store.add_many([dict(row, user_id=items[0]["user_id"]) for row in batch])
            print(f"{sample['sample_id']}: {len(items)} turns + {args.distractors} distractors", flush=True)
        store.backend.build_vector_index(model, MINILM_DIMENSIONS)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    for options in args.options or [{}]:
        with MemoryStore.open(url, "local", backend_options=options) as store:
            def search(user: str, question: str) -> list[str]:
                return [r.metadata.get("dia_id") for r in store.search(question, user_id=user, limit=max(KS), min_score=0)]

            report = ask(samples, search)
        print(json.dumps({"options": options, "distractors": args.distractors, "recall": report["recall"],
                          "ndcg10": report["ndcg10"], "latency_ms": report["latency_ms"],
                          "load": round(os.getloadavg()[0], 2)}), flush=True)
    server.cleanup()


if __name__ == "__main__":
    main()
