"""Writers at one instant get the answer a sequential writer gets: four real processes saving
equivalent facts (``city``, ``home_city``, ``location``, ``current_city``) and the same note for
the same user end with one fact and one note, on SQLite and on PostgreSQL (the user's write lock:
``lock_user_writes`` inside ``in_one_transaction``)."""

from __future__ import annotations

import multiprocessing
import traceback
from pathlib import Path

import pytest

from navi_memory import MemoryStore

PROCESSES = 4
ROUNDS = 6
KEYS = ("city", "home_city", "location", "current_city")
NOTE = "The spare key is under the blue flower pot by the back door"


def _writer(url: str, worker: int, start, results) -> None:
    out: list = []
    try:
        with MemoryStore.open(url, embeddings="hashing") as store:
            for r in range(ROUNDS):
                user = f"round{r}"
                start.wait(timeout=120)
                change = store.upsert_fact(user_id=user, category="profile", key=KEYS[worker], value="Oslo")
                note = store.add_note(user_id=user, content=NOTE if worker % 2 else NOTE.lower() + ".")
                out.append((user, change.fact.id, change.action, note.item.id, note.action))
    except Exception:
        out.append(traceback.format_exc())
    results.put((worker, out))


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_four_processes_writing_equivalent_facts_and_one_note_keep_one_of_each(backend, request,
                                                                               tmp_path: Path):
    url = request.getfixturevalue("pg_url") if backend == "postgres" else f"sqlite:///{tmp_path / 'race.db'}"
    with MemoryStore.open(url, embeddings="hashing"):
        pass  # the schema, created once as a deployment's migrate step would
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(PROCESSES), ctx.Queue()
    workers = [ctx.Process(target=_writer, args=(url, w, start, results)) for w in range(PROCESSES)]
    for p in workers:
        p.start()
    reports = dict(results.get(timeout=300) for _ in workers)
    for p in workers:
        p.join(60)
        assert p.exitcode == 0
    errors = [r for out in reports.values() for r in out if isinstance(r, str)]
    assert errors == []
    with MemoryStore.open(url, embeddings="hashing") as store:
        for r in range(ROUNDS):
            user = f"round{r}"
            facts = store.get_all_facts(user_id=user)
            assert [(f.value, f.history) for f in facts] == [("Oslo", [])], facts
            notes = store.list_items(user_id=user, types=["note"], limit=100)
            assert [n.content for n in notes] in ([NOTE], [NOTE.lower() + "."])
            # every writer was told about the one fact and the one note that stand
            answers = [row for out in reports.values() for row in out if row[0] == user]
            assert len(answers) == PROCESSES
            assert {a[1] for a in answers} == {facts[0].id} and {a[3] for a in answers} == {notes[0].id}
            assert sorted(a[2] for a in answers) == ["added"] + ["unchanged"] * (PROCESSES - 1)
            assert sorted(a[4] for a in answers) == ["added"] + ["existing"] * (PROCESSES - 1)
