"""The int8-then-rescore path of ``VectorIndex.top`` (optional usearch) agrees with exact search,
stays correct through updates and deletes, and keeps users apart in a real SQLite store."""

from __future__ import annotations

import numpy as np
import pytest

from navi_memory import vectors
from navi_memory.store import MemoryStore
from navi_memory.vectors import VectorIndex

pytest.importorskip("usearch")

DIM, N, K = 64, 6000, 10


def dataset(seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, DIM)).astype(np.float32), rng.standard_normal((40, DIM)).astype(np.float32)


def both(rows: np.ndarray) -> tuple[VectorIndex, VectorIndex]:
    fast, exact = VectorIndex(DIM, quantise_from=1000), VectorIndex(DIM, quantise_from=None)
    for index in (fast, exact):
        for start in range(0, len(rows), 1500):  # several batches: the int8 copy grows with the rows
            index.upsert_many(range(start, min(start + 1500, len(rows))), rows[start:start + 1500])
    return fast, exact


def recall(fast: VectorIndex, exact: VectorIndex, queries: np.ndarray) -> float:
    hits = sum(len(set(fast.top(q, K)[0].tolist()) & set(exact.top(q, K)[0].tolist())) for q in queries)
    return hits / (K * len(queries))


def test_quantised_top_10_agrees_with_exact_search():
    rows, queries = dataset()
    fast, exact = both(rows)
    assert fast.quantised and not exact.quantised
    assert recall(fast, exact, queries) >= 0.98
    ids, sims = fast.top(queries[0], K)
    assert np.all(np.diff(sims) <= 0)  # best first
    unit = rows[ids] / np.linalg.norm(rows[ids], axis=1, keepdims=True)
    q = queries[0] / np.linalg.norm(queries[0])
    np.testing.assert_allclose(sims, unit @ q, rtol=1e-5, atol=1e-6)  # rescored: exact cosines


def test_quantised_top_matches_the_forced_exact_scan_of_the_same_index():
    rows, queries = dataset(11)
    fast, _ = both(rows)
    hits = sum(len(set(fast.top(q, K)[0].tolist()) & set(fast.top(q, K, exact=True)[0].tolist()))
               for q in queries)
    assert hits / (K * len(queries)) >= 0.98


def test_updates_and_deletes_stay_correct():
    rows, queries = dataset(3)
    fast, exact = both(rows)
    rng = np.random.default_rng(5)
    gone = rng.choice(N, 1500, replace=False)
    changed = rng.choice(np.setdiff1d(np.arange(N), gone), 800, replace=False)
    new_rows = rng.standard_normal((800, DIM)).astype(np.float32)
    for index in (fast, exact):
        for item in gone:
            index.remove(int(item))
        index.upsert_many(changed, new_rows)
    assert recall(fast, exact, queries) >= 0.98
    target = new_rows[0]  # an updated vector is found by its new value, a removed one never
    assert fast.top(target, 1)[0].tolist() == [int(changed[0])]
    for q in queries:
        assert not set(fast.top(q, 50)[0].tolist()) & set(gone.tolist())
    for item in gone[:100]:  # back again after removal
        fast.upsert_many([int(item)], rows[item][None, :])
    assert fast.top(rows[gone[0]], 1)[0].tolist() == [int(gone[0])]


def test_sqlite_users_stay_apart_with_the_quantised_index(tmp_path, monkeypatch):
    monkeypatch.setattr(vectors, "QUANTISE_FROM", 300)
    rows, queries = dataset(9)
    url = f"sqlite:///{tmp_path / 'q.db'}"
    store = MemoryStore.open(url, embeddings=False, embedding_model="fixed-64")
    try:
        for user, part in (("ann", rows[:4000]), ("bob", rows[4000:5000])):
            store.add_many([{"user_id": user, "content": f"note {user} {i}", "embedding": vec}
                            for i, vec in enumerate(part)])
        for user, part in (("ann", rows[:4000]), ("bob", rows[4000:5000])):
            unit = part / np.linalg.norm(part, axis=1, keepdims=True)
            for q in queries[:10]:
                results = store.search("zzz", user_id=user, query_embedding=q, limit=K, recency="neutral")
                assert results and all(r.content.startswith(f"note {user} ") for r in results)
                best = int(np.argmax(unit @ (q / np.linalg.norm(q))))
                assert results[0].content == f"note {user} {best}"
        assert store.backend.vectors.memory()[1]  # ann (4000 rows) searches int8 first
    finally:
        store.close()
