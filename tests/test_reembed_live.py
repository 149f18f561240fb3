"""A model change under load: while ``reembed`` moves the vectors (throttled, in this process), a real
process searches and another writes, both with the new and the previous model configured. Every
search finds what it looks for by its vector, and every search's cosines are those of one model;
every acknowledged write ends with a vector of the new model. On SQLite, PostgreSQL and Citus."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from navi_memory import MemoryStore

from .fakes import FakeEmbeddings
from .repeat import lines, repeat

pytestmark = pytest.mark.on_citus

USERS = tuple(f"user{n}" for n in range(6))
SEEDED = 4  # items per user before the move


def _seed(user: str, n: int) -> str:
    return f"{user} remembers the lighthouse number {n} on the northern coast"


def _models() -> dict[str, FakeEmbeddings]:
    return {"old": FakeEmbeddings("model-old", 64), "new": FakeEmbeddings("model-new", 48)}


def _open(url: str) -> MemoryStore:
    models = _models()
    return MemoryStore.open(url, embeddings=models["new"], previous_embeddings=models["old"], migrate=False)


def _cosine(embedder: FakeEmbeddings, query: str, text: str) -> float:
    a, b = np.array(embedder.expected(query)), np.array(embedder.expected(text))
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _search(store: MemoryStore, n: int) -> dict[str, Any]:
    """One user's search for a seeded item: which model's cosines it reported, or what went wrong."""
    user, wanted = USERS[n % len(USERS)], _seed(USERS[n % len(USERS)], n % SEEDED)
    results = store.search(wanted, user_id=user, limit=10, min_score=0)
    semantic = {r.content: r.scores["semantic"] for r in results if "semantic" in r.scores}
    if wanted not in semantic:
        return {"error": f"{user}: {wanted!r} not found by its vector; got {sorted(semantic)}"}
    models = [name for name, embedder in _models().items()
              if all(abs(score - _cosine(embedder, wanted, text)) < 1e-4 for text, score in semantic.items())]
    return {"model": models[0]} if len(models) == 1 else {"error": f"{user}: cosines of {models or 'no model'}"}


def _write(store: MemoryStore, n: int) -> dict[str, Any]:
    user, content = USERS[n % len(USERS)], f"written during the move, note {n}"
    time.sleep(0.05)  # a steady trickle, not a flood the move could never catch up with
    return {"user": user, "id": store.add(user_id=user, content=content, dedup=False), "content": content}


STEPS = {"search": _search, "write": _write}


def _guarded(step: str) -> Any:
    def run(store: MemoryStore, n: int) -> dict[str, Any]:
        try:
            return STEPS[step](store, n)
        except Exception as exc:  # counted: the test asserts there are none
            return {"error": f"{type(exc).__name__}: {exc}"}
    return run


def _process(step: str, url: str, log: str, started: Any, done: Any) -> None:
    """A real process repeating one step until ``done`` (``repeat``)."""
    repeat(lambda: _open(url), _guarded(step), log, started, done)


def test_searches_stay_whole_and_writes_land_while_the_model_changes(db_url: str, tmp_path: Path) -> None:
    models = _models()
    with MemoryStore.open(db_url, embeddings=models["old"]) as store:
        for user in USERS:
            for n in range(SEEDED):
                store.add(user_id=user, content=_seed(user, n))
    ctx = multiprocessing.get_context("spawn")
    started, done = ctx.Barrier(3), ctx.Event()
    logs = {step: tmp_path / f"{step}.jsonl" for step in STEPS}
    procs = [ctx.Process(target=_process, args=(step, db_url, str(logs[step]), started, done)) for step in STEPS]
    for proc in procs:
        proc.start()
    try:
        started.wait(timeout=120)
        time.sleep(0.5)  # searches of the old model first
        with _open(db_url) as store:
            first = store.reembed(batch_size=2, items_per_second=15)
            time.sleep(0.5)  # and of the new one after
            done.set()
            for proc in procs:
                proc.join(60)
            last = store.reembed()  # what the writer added to users already moved... is theirs already
    finally:
        done.set()
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(10)
    assert [proc.exitcode for proc in procs] == [0, 0]
    searches, writes = lines(logs["search"]), lines(logs["write"])
    assert [line for line in searches + writes if "error" in line] == []
    assert {line["model"] for line in searches} == {"old", "new"}, "searches ran before and after the move"
    assert first.users_moved + last.users_moved == len(USERS) and last.complete
    assert first.paused_seconds > 0
    with MemoryStore.open(db_url, embeddings=models["new"]) as store:  # the previous model retired
        status = store.embedding_status()
        assert (status["ready"], status["items"], status["other_model"]) == (len(USERS) * SEEDED + len(writes),) * 2 + (0,)
        for user in USERS:
            stored = {item.id: item.content for item in store.list_items(user_id=user, limit=1000)}
            assert {w["id"]: w["content"] for w in writes if w["user"] == user}.items() <= stored.items()
