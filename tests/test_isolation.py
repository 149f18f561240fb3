"""Isolation of users, property-based: nothing done as user A reads or changes user B's memory.

Per example: random user ids (case variants, LIKE wildcards, quotes, unicode), B's memory (items
carrying a secret marker, facts, summary, a session), A's own memory, then a random sequence of
operations and tool calls made as A, some aimed at B's ids, fact keys and session id. Every
result must be free of B's marker, and B's rows (every table with a user column) must be
byte-for-byte the same afterwards. Reads across users need ``all_users=True``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from navi_memory import NaviMemoryError, NotFoundError, ValidationError
from navi_memory.integrations._tools import TOOLS, MemoryTools
from navi_memory.models import FACT_CATEGORIES

from .isolation_support import B_PERSONS, HttpClients, ScriptedDraws, http_requests, leaks, seed_promoted, user_rows

TRICKY_IDS = ["alice", "Alice", "ALICE", "alice2", "a%", "a_ice", "%", "_", "*", "' OR '1'='1", "a\\", "ålice",
              "alice\u0301", "bob; DROP TABLE items;--", "42", "用户"]
USER_IDS = st.one_of(st.sampled_from(TRICKY_IDS),  # any id the store accepts (validation.user_id's rule)
                     st.text(st.characters(blacklist_categories=("Cs", "Cc", "Cf")), min_size=1, max_size=12)
                     .filter(lambda uid: uid == uid.strip() and uid.strip() != ""))
WORDS = ["coffee", "berlin", "trains", "NOT", "OR", "*", '"quoted"', "-minus", "NEAR", "col:on", "%", "_",
         "project", "lattes", "' OR 1=1 --", "dog"]
QUERIES = st.one_of(st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join),
                    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30))
SEARCH_FILTERS = st.fixed_dictionaries({}, optional={
    "theme": st.sampled_from(["general", "work", "conversation", "preferences"]),
    "types": st.lists(st.sampled_from(["note", "fact", "preference"]), min_size=1, max_size=2),
    "status": st.sampled_from(["active", "archived", "any"]),
    "recency_days": st.sampled_from([1, 30, 3650]),
    "fusion": st.sampled_from(["weighted", "rrf"]),
    "include_expired": st.booleans(),
})


# only ever in B's content and values; fixed, so an example replays exactly (the fake embeddings of
# B's contents, hence how promote clusters them, depend on it); longer than a generated user id
MARKER = "zq-secret-of-user-b"


def _distinct(pair: tuple[str, str]) -> bool:
    a, b = (p.strip() for p in pair)
    return bool(a) and bool(b) and a != b


class World:
    """B's seeded memory, what A may target, and the checks every result must pass."""

    def __init__(self, store, a: str, b: str, b_texts: list[str]) -> None:
        self.store, self.a, self.b = store, a.strip(), b.strip()
        self.marker = MARKER
        self.b_ids = [store.add(user_id=b, content=f"{self.marker} {text} {n}", theme="work", tags=["secret"])
                      for n, text in enumerate(b_texts)]
        self.b_keys = ["home_city", "drink"]
        for key in self.b_keys:
            store.upsert_fact(user_id=b, category="profile", key=key, value=f"{self.marker} value")
        store.set_summary(f"{self.marker} summary of B", user_id=b)
        self.b_sid = "shared-session-id"
        store.add_messages(self.b_sid, [{"role": "user", "content": f"{self.marker} I live in Berlin"},
                                        {"role": "assistant", "content": "Noted."}], user_id=b, triggers=False)
        self.a_ids = [store.add(user_id=a, content=f"A's note about coffee {n}") for n in range(2)]
        store.upsert_fact(user_id=a, category="profile", key="home_city", value="Lisbon")
        store.set_household_mode("multi", user_id=b)
        self.b_persons = [store.add_person(name, user_id=b, aliases=aliases, notes=f"{self.marker} notes of {name}")
                          for name, aliases in B_PERSONS]
        self.b_names = [name for name, aliases in B_PERSONS] + [a for _, aliases in B_PERSONS for a in aliases]
        self.b_ids.append(store.add(user_id=b, content=f"{self.marker} about a person", person=B_PERSONS[0][1][0]))
        seed_promoted(store, b, self.marker)
        self.tools = MemoryTools(store, a)
        self.http = HttpClients(store)

    def clean(self, value) -> None:
        assert not leaks(value, self.marker), f"user B's data leaked to A: {value!r}"[:500]


def _target(world: World, data) -> int:
    return data.draw(st.sampled_from(world.b_ids + world.a_ids + [999_999]))


def op_search(world, data):
    results = world.store.search(data.draw(QUERIES), user_id=world.a, **data.draw(SEARCH_FILTERS))
    world.clean(results)
    assert all(r.id not in world.b_ids for r in results)


def op_search_marker(world, data):
    world.clean(world.store.search(world.marker, user_id=world.a, status="any", include_expired=True))


def op_list(world, data):
    items = world.store.list_items(user_id=world.a, status="any", include_expired=True, limit=10_000)
    world.clean(items)
    assert {i.user_id for i in items} <= {world.a}


def op_facts(world, data):
    facts = world.store.get_all_facts(user_id=world.a, include_history=True, include_expired=True,
                                      search=data.draw(st.sampled_from([None, world.marker, "home", "%"])))
    world.clean(facts)
    assert {f.user_id for f in facts} <= {world.a}


def op_get_fact(world, data):
    try:
        world.clean(world.store.get_fact(data.draw(st.sampled_from(world.b_keys)), user_id=world.a))
    except NotFoundError:
        pass


def op_item_by_id(world, data):
    target = _target(world, data)
    name = data.draw(st.sampled_from(["get", "update", "pin", "archive", "delete"]))
    call = {"get": lambda: world.store.get(target, user_id=world.a),
            "update": lambda: world.store.update(target, user_id=world.a, content="A rewrote this"),
            "pin": lambda: world.store.pin(target, user_id=world.a),
            "archive": lambda: world.store.archive(target, user_id=world.a),
            "delete": lambda: world.store.delete(target, user_id=world.a)}[name]
    if target in world.a_ids:
        world.clean(call())
        if name == "delete":
            world.a_ids.remove(target)
        return
    with pytest.raises(NotFoundError) as info:
        call()
    world.clean(str(info.value))


def op_fact_writes(world, data):
    key = data.draw(st.sampled_from(world.b_keys))
    if data.draw(st.booleans()):
        world.clean(world.store.upsert_fact(user_id=world.a, category=data.draw(st.sampled_from(FACT_CATEGORIES)),
                                            key=key, value="A's own value"))
    else:
        try:
            world.store.delete_fact(key, user_id=world.a)
        except NotFoundError:
            pass


def op_summary(world, data):
    world.clean(world.store.get_summary(user_id=world.a))
    world.clean(world.store.summary_history(user_id=world.a))
    world.store.set_summary("A's summary", user_id=world.a)


def op_sessions(world, data):
    sid = world.b_sid
    try:
        world.clean(world.store.get_session(sid, user_id=world.a))
    except NotFoundError:
        pass
    world.store.add_messages(sid, [{"role": "user", "content": "A speaks in a session with B's id"}],
                             user_id=world.a, triggers=False)
    world.clean(world.store.extract_session(sid, user_id=world.a))
    world.clean(world.store.get_session(sid, user_id=world.a))
    world.clean(world.store.list_sessions(user_id=world.a))
    world.clean(world.store.usage_stats(user_id=world.a))
    world.store.mark_session_extracted(sid, user_id=world.a)


def op_themes(world, data):
    themes = world.store.list_themes(user_id=world.a)
    world.clean(themes)


def op_maintenance(world, data):
    world.store.backfill(user_id=world.a)
    world.store.rebuild_embeddings(user_id=world.a)
    world.clean(world.store.process_stale_sessions(user_id=world.a, stale_minutes=0))


def op_forget(world, data):
    world.clean(world.store.forget(user_id=world.a))
    world.a_ids.clear()


def op_tool(world, data):
    name = data.draw(st.sampled_from(sorted(TOOLS)))
    args = {"memory_search": {"query": data.draw(st.sampled_from([world.marker, "coffee berlin", "*"])),
                              "status": "any"},
            "memory_add_note": {"content": "A's note from a tool"},
            "memory_save_fact": {"category": "profile", "key": data.draw(st.sampled_from(world.b_keys)),
                                 "value": "A's tool value"},
            "memory_get": {"item_id": _target(world, data)},
            "memory_archive": {"item_id": _target(world, data)},
            "memory_forget": {"key": data.draw(st.sampled_from(world.b_keys))},
            "memory_list_themes": {}}[name]
    if data.draw(st.booleans()):  # a model trying to pick the user: the argument is ignored
        args["user_id"] = world.b
    out = world.tools.run(name, **args)
    world.clean(out)
    if name in ("memory_get", "memory_archive") and args["item_id"] not in world.a_ids:
        assert "error" in json.loads(out)


def op_persons(world, data):
    """Person operations as A with B's person ids and names: B's household is neither read nor changed."""
    store, a = world.store, world.a
    ref = data.draw(st.sampled_from([p.id for p in world.b_persons] + world.b_names))
    store.add(user_id=a, content="A's note about someone", person=world.b_names[0])  # renamed with A's person
    calls = [lambda: store.get_person(ref, user_id=a), lambda: store.remove_person(ref, user_id=a),
             lambda: store.update_person(ref, user_id=a, notes="A rewrote this person"),
             lambda: store.update_person(ref, user_id=a, display_name="Renamed by A")]
    for call in data.draw(st.permutations(calls)):
        try:
            world.clean(call())  # only when A has a person of that name (A's own)
        except (NotFoundError, ValidationError) as exc:  # (a second "Renamed by A" clashes with the first)
            world.clean(str(exc))
    world.clean(store.resolve_person_ref(str(ref), user_id=a))
    world.clean(store.list_persons(user_id=a))
    world.clean(store.infer_speaker(f"this is {world.b_names[0]}", user_id=a, hint=ref))
    mode = data.draw(st.sampled_from(["single", "multi"]))
    try:
        world.clean(store.set_household_mode(mode, user_id=a))
        world.clean(store.put_household(user_id=a, members=[{"display_name": world.b_names[0], "notes": "A's own"}]))
        if data.draw(st.booleans()):
            world.clean(store.add_person(world.b_names[1], user_id=a, aliases=["A's alias"]))
    except ValidationError as exc:  # single mode with a person already there: A's own rule
        world.clean(str(exc))
    world.clean(store.household(user_id=a))


def op_promotion(world, data):
    world.clean(world.store.promote(user_id=world.a))
    world.clean(world.store.promoted_facts(user_id=world.a))
    world.clean(world.store.memory_markdown(user_id=world.a))


def op_http(world, data):
    """Every route of the REST API and the browser UI, as A, aimed at B's item ids, fact keys and persons."""
    target = data.draw(st.sampled_from(world.b_ids + [999_999]))
    key = data.draw(st.sampled_from(world.b_keys))
    name = data.draw(st.sampled_from(world.b_names))
    for where, method, kwargs in http_requests(world.http, world.a, target, key, name, "repeated preference coffee",
                                              world.b_sid):
        response = world.http.request(where, method, **kwargs)
        assert response.status_code < 500, (where, method, response.text)
        world.clean(response.text)
        if where[1].endswith(f"/{target}"):
            assert response.status_code == 404, (where, method, response.text)


def op_export_import(world, data):
    """An export of A holds only A's records; importing it under a user map writes only the mapped user."""
    records: list[dict] = []
    try:
        world.store.export(records.append, user_id=world.a)
    except NotFoundError:  # A has nothing stored (after forget)
        return
    world.clean(records)
    assert records[0]["users"] == [world.a]
    assert {r["user_id"] for r in records[1:]} == {world.a}
    copy = next(name for name in (world.a + "→copy", world.a + "→copy2") if name != world.b)
    user_map = {world.a: copy} | ({world.b: copy} if data.draw(st.booleans()) else {})  # B is not in the file
    world.store.import_records(records, user_map=user_map)
    # the copy holds what A holds, nothing of B's (A may hold no items at all: after op_forget, a summary)
    assert _memory_of(world.store, copy) == _memory_of(world.store, world.a)
    world.store.forget(user_id=copy)


def _memory_of(store, user: str) -> dict[str, list]:
    """What op_export_import compares between A and A's imported copy (no ids, no user ids)."""
    return {"items": sorted(i.content for i in store.list_items(user_id=user, status="any", limit=10_000,
                                                                  include_expired=True)),
            "facts": sorted((f.category, f.key, f.value) for f in store.get_all_facts(user_id=user)),
            "summary": store.get_summary(user_id=user),
            "persons": [p.display_name for p in store.list_persons(user_id=user)],
            "promoted": sorted(f.key for f in store.promoted_facts(user_id=user))}


OPS = [op_search, op_search_marker, op_list, op_facts, op_get_fact, op_item_by_id, op_fact_writes, op_summary,
       op_sessions, op_themes, op_maintenance, op_forget, op_tool, op_persons, op_promotion, op_http,
       op_export_import]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(users=st.tuples(USER_IDS, USER_IDS).filter(_distinct), data=st.data())
# found by CI: after forget, A's summary alone is exported; its import gives the copy no items
@example(users=("alice", "Alice"), data=ScriptedDraws(["coffee"], [op_forget, op_summary, op_export_import], False))
def test_operations_as_one_user_never_read_or_change_another(store, backend_name, db_url, tmp_path, users, data):
    data = data.replay() if isinstance(data, ScriptedDraws) else data
    try:
        world = World(store, *users, data.draw(st.lists(QUERIES.filter(str.strip), min_size=1, max_size=4)))
        before = user_rows(backend_name, db_url, tmp_path, world.b)
        assert before["items"] and before["facts"] and before["messages"] and before["persons"]
        assert before["promotions"]
        for op in data.draw(st.lists(st.sampled_from(OPS), min_size=3, max_size=8)):
            op(world, data)
        assert user_rows(backend_name, db_url, tmp_path, world.b) == before
        store.forget(user_id=users[0])
        assert user_rows(backend_name, db_url, tmp_path, world.b) == before
    finally:  # a failing example leaves no state behind for hypothesis' next (shrunk) one
        for user in users:
            store.forget(user_id=user)


@pytest.mark.parametrize("call", [
    pytest.param(lambda s: s.search("coffee"), id="search"),
    pytest.param(lambda s: s.list_items(), id="list_items"),
    pytest.param(lambda s: s.get_all_facts(), id="get_all_facts"),
    pytest.param(lambda s: s.list_sessions(), id="list_sessions"),
    pytest.param(lambda s: s.usage_stats(), id="usage_stats"),
    pytest.param(lambda s: s.process_stale_sessions(), id="process_stale_sessions"),
    pytest.param(lambda s: s.list_themes(user_id=None), id="list_themes"),
    pytest.param(lambda s: s.forget(user_id=None), id="forget"),
])
def test_reads_across_users_need_the_admin_flag(store, call):
    store.add(user_id="alice", content="alice's coffee")
    store.add(user_id="bob", content="bob's coffee")
    with pytest.raises(ValidationError, match="user_id"):
        call(store)


def test_admin_flag_reads_everyone_but_a_given_user_still_scopes(store):
    store.add(user_id="alice", content="alice's coffee")
    store.add(user_id="bob", content="bob's coffee")
    store.upsert_fact(user_id="bob", category="profile", key="city", value="Oslo")
    assert {i.user_id for i in store.list_items(all_users=True)} == {"alice", "bob"}
    assert {r.content for r in store.search("coffee", all_users=True, types=["note"])} == {"alice's coffee", "bob's coffee"}
    assert [f.user_id for f in store.get_all_facts(all_users=True)] == ["bob"]
    assert {i.user_id for i in store.list_items(user_id="alice", all_users=True)} == {"alice"}
    assert {r.content for r in store.search("coffee", user_id="alice", all_users=True, types=["note"])} == {"alice's coffee"}


def test_tool_schemas_have_no_user_parameter():
    for name, (schema, description) in TOOLS.items():
        fields = set(schema.model_json_schema().get("properties", {}))
        assert not {f for f in fields if "user" in f.lower()}, name
        assert "user_id" not in description


def test_framework_tools_expose_no_user_parameter_and_ignore_one(store):
    from navi_memory.integrations.langchain import NaviMemoryToolkit
    from navi_memory.integrations.llamaindex import NaviMemoryToolSpec

    store.add(user_id="bob", content="bob's secret coffee order")
    lc_tools = NaviMemoryToolkit(store=store, user_id="alice").get_tools()
    li_tools = NaviMemoryToolSpec(store, user_id="alice").to_tool_list()
    for tool in lc_tools:
        assert not [a for a in tool.args if "user" in a.lower()], tool.name
    for tool in li_tools:
        properties = tool.metadata.get_parameters_dict().get("properties", {})
        assert not [a for a in properties if "user" in a.lower()], tool.metadata.name
    search = next(t for t in lc_tools if t.name == "memory_search")
    out = search.invoke({"query": "secret coffee", "user_id": "bob"})
    assert "bob" not in out and json.loads(out)["results"] == []
    li_search = next(t for t in li_tools if t.metadata.name == "memory_search")
    assert "bob's secret" not in str(li_search.call(query="secret coffee", user_id="bob"))


def test_user_ids_differing_in_case_or_wildcards_are_different_users(store):
    for user in ("alice", "Alice", "a%", "a_ice", "al*"):
        store.add(user_id=user, content=f"note of {user}")
    for user in ("alice", "Alice", "a%", "a_ice", "al*"):
        assert [i.content for i in store.list_items(user_id=user)] == [f"note of {user}"]
        assert [r.content for r in store.search("note", user_id=user)] == [f"note of {user}"]


def test_errors_about_foreign_ids_do_not_reveal_the_owner(store):
    foreign = store.add(user_id="bob", content="bob's")
    with pytest.raises(NaviMemoryError) as info:
        store.get(foreign, user_id="alice")
    assert "bob" not in str(info.value)


def test_import_writes_only_into_the_users_its_records_name_after_the_map(store, backend_name, db_url, tmp_path):
    """A file of alice imported as carol: bob's rows stay byte-for-byte, whatever the map says
    about bob and whatever user a fact's nested item claims."""
    store.add(user_id="bob", content="bob's own note")
    store.upsert_fact(user_id="bob", category="profile", key="city", value="Oslo")
    store.add(user_id="alice", content="alice's note")
    store.upsert_fact(user_id="alice", category="profile", key="city", value="Lisbon")
    store.add_messages("s1", [{"role": "user", "content": "hi"}], user_id="alice", triggers=False)
    records: list[dict] = []
    store.export(records.append, user_id="alice")
    for record in records:  # a tampered file: the fact's own item claims to be bob's
        if record.get("type") == "fact" and record.get("item"):
            record["item"]["user_id"] = "bob"
    bob = user_rows(backend_name, db_url, tmp_path, "bob")
    report = store.import_records(records, user_map={"alice": "carol", "bob": "mallory"})
    assert report.added["item"] == 1 and report.added["fact"] == 1
    assert user_rows(backend_name, db_url, tmp_path, "bob") == bob
    assert user_rows(backend_name, db_url, tmp_path, "mallory") == {k: [] for k in bob}
    assert [f.value for f in store.get_all_facts(user_id="carol")] == ["Lisbon"]
    carols = store.list_items(user_id="carol", status="any")
    assert "alice's note" in {i.content for i in carols} and {i.user_id for i in carols} == {"carol"}
    assert len(carols) == len(store.list_items(user_id="alice", status="any"))
