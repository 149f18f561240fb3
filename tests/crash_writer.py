"""A resumable ingest, run as ``python -m tests.crash_writer URL TOTAL [step]`` and killed by test_crash_safety.

The ingest key is counting: the corpus is documents 0..TOTAL-1 in batches of ``BATCH``, each batch
one ``add_many`` (one transaction) followed by one fact. On start it counts the documents already
stored, so a re-run continues where a killed run stopped and writes nothing twice. With ``step``
it starts each batch only when a line arrives on stdin: the test decides how far a run gets
before its kill, whatever the machine's speed.
"""

from __future__ import annotations

import sys

from navi_memory import MemoryStore

USER = "crash-user"
BATCH = 10


def document(n: int) -> str:
    return f"document {n} of the crash test about coffee, trains and berlin"


def stored_documents(store: MemoryStore) -> int:
    count, page = 0, 10_000
    while True:
        found = len(store.list_items(user_id=USER, types=["note"], limit=page, offset=count))
        count += found
        if found < page:
            return count


def ingest(url: str, total: int, step: bool = False) -> None:
    with MemoryStore.open(url, embeddings="hashing") as store:
        done = stored_documents(store)
        assert done % BATCH == 0, f"half-written batch: {done} documents"
        print("ready", done, flush=True)
        if done:  # the fact of the last finished batch may be missing: upserting it again is a no-op otherwise
            store.upsert_fact(user_id=USER, category="other", key=f"batch_{done // BATCH - 1}", value="done")
        for start in range(done, total, BATCH):
            if step and not sys.stdin.readline():
                return  # the test closed stdin: stop between batches
            store.add_many([{"user_id": USER, "content": document(n), "metadata": {"seq": n}}
                            for n in range(start, min(start + BATCH, total))])
            store.upsert_fact(user_id=USER, category="other", key=f"batch_{start // BATCH}", value="done")
            print("batch", start // BATCH, flush=True)  # lets the test kill after some progress, at any speed
        store.backfill()  # vectors a killed run left pending
    print("finished", flush=True)


if __name__ == "__main__":
    ingest(sys.argv[1], int(sys.argv[2]), step=sys.argv[3:] == ["step"])
