"""Agent and run scopes on every backend: items and facts carry agent_id / run_id, reads filter by
them exactly, a fact's identity includes its agent, and conversations pass their scope on."""

from __future__ import annotations

import pytest

from navi_memory import MemoryStore, ValidationError

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)

U = "u1"


def test_items_carry_scopes_and_reads_filter_by_them(store):
    a = store.add(user_id=U, content="planner note about Lisbon", agent_id="planner", run_id="r1")
    b = store.add_many([{"user_id": U, "content": "writer note about Lisbon", "agent_id": "writer", "run_id": "r2"},
                        {"user_id": U, "content": "shared note about Lisbon"}])
    item = store.get(a, user_id=U)
    assert (item.agent_id, item.run_id) == ("planner", "r1")
    assert [i.id for i in store.list_items(user_id=U, agent_id="planner")] == [a]
    assert [i.id for i in store.list_items(user_id=U, run_id="r2")] == [b[0]]
    assert store.count_items(user_id=U, agent_id="writer") == 1 and store.count_items(user_id=U) == 3
    assert [r.id for r in store.search("Lisbon", user_id=U, agent_id="planner")] == [a]
    assert {r.agent_id for r in store.search("Lisbon", user_id=U)} == {"planner", "writer", None}
    assert store.count_items(user_id=U, agent_id="Planner") == 0  # exact, never folded


@pytest.mark.parametrize("bad", ["", " planner", "planner ", "a\nb", "a\u200bb", "x" * 257, 3.5])
def test_bad_scope_ids_are_refused(store, bad):
    with pytest.raises(ValidationError):
        store.add(user_id=U, content="x", agent_id=bad)
    with pytest.raises(ValidationError):
        store.list_items(user_id=U, run_id=bad)
    with pytest.raises(ValidationError):
        store.upsert_fact(user_id=U, category="profile", key="k", value="v", agent_id=bad)


def test_a_facts_identity_includes_its_agent(store):
    store.upsert_fact(user_id=U, category="preferences", key="tone", value="formal", agent_id="A", run_id="r1")
    store.upsert_fact(user_id=U, category="preferences", key="tone", value="casual", agent_id="B")
    store.upsert_fact(user_id=U, category="preferences", key="tone", value="neutral")
    facts = store.get_all_facts(user_id=U)
    assert sorted((f.agent_id or "", f.value) for f in facts) == [("", "neutral"), ("A", "formal"), ("B", "casual")]
    change = store.upsert_fact(user_id=U, category="preferences", key="tone", value="terse", agent_id="A",
                               run_id="r2")
    assert change.action == "updated" and change.previous_value == "formal" and change.fact.run_id == "r2"
    assert [f.value for f in store.get_all_facts(user_id=U, agent_id="A")] == ["terse"]
    assert [f.value for f in store.get_all_facts(user_id=U, run_id="r2")] == ["terse"]
    assert store.get_fact("tone", user_id=U, agent_id="B").value == "casual"
    assert [h.value for h in store.get_fact("tone", user_id=U, agent_id="A").history] == ["formal"]
    # the fact's searchable item carries the agent too
    assert {r.agent_id for r in store.search("tone", user_id=U, agent_id="A")} == {"A"}
    assert store.delete_fact("tone", user_id=U, agent_id="A") == 1
    assert sorted(f.agent_id or "" for f in store.get_all_facts(user_id=U)) == ["", "B"]


def test_scoped_facts_travel_through_export_and_import(store, new_db_url, clock):
    store.upsert_fact(user_id=U, category="profile", key="city", value="Rome", agent_id="A")
    store.upsert_fact(user_id=U, category="profile", key="city", value="Oslo")
    records: list[dict] = []
    store.export(records.append, user_id=U)
    with MemoryStore.open(new_db_url(), embeddings=False, clock=clock) as target:
        report = target.import_records(records)
        assert report.added["fact"] == 2
        assert target.import_records(records).added.get("fact", 0) == 0  # natural key includes the agent
        assert sorted((f.agent_id or "", f.value) for f in target.get_all_facts(user_id=U)) == [("", "Oslo"),
                                                                                              ("A", "Rome")]


def test_a_conversation_passes_its_scope_to_what_is_extracted(lexical_store):
    store = lexical_store
    store.add_messages("s1", [{"role": "user", "content": "My name is Anna and I live in Porto."},
                              {"role": "assistant", "content": "Nice to meet you, Anna."}],
                       user_id=U, triggers=False, agent_id="concierge", run_id="run-7")
    store.add_messages("s1", [{"role": "user", "content": "Remember that I like sardines."}], user_id=U,
                       triggers=False)  # no scope given: the session keeps its own
    report = store.extract_session("s1", user_id=U)
    assert report.chunks >= 1
    chunks = store.list_items(user_id=U, types=["note"])
    assert chunks and {(i.agent_id, i.run_id) for i in chunks} == {("concierge", "run-7")}
    assert store.count_items(user_id=U, agent_id="concierge") == len(chunks)
    facts = store.get_all_facts(user_id=U)
    assert facts and all(f.agent_id is None and f.run_id == "run-7" for f in facts)  # facts stay shared
