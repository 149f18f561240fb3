"""Facts follow when things were said, not when they were processed (issue 32, item 3): a fact's
value carries its statement's time, an older statement never replaces a newer current value (it
enters the history at its own time), and the history shows statement times. On both backends,
through the pipeline (rules, and a scripted chat model) and through ``upsert_fact(observed_at=)``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from navi_memory.core import timeline

from .test_pipeline_extraction import chat, reply

U = "tomas"
UTC = timezone.utc
TODAY = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LIVED = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)  # "I live in Berlin"
MOVED = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)  # "I moved to Munich"


def said(store, sid, when, *lines, triggers=False, user=U):
    """A conversation dated ``when`` (a minute per message), lines alternating user / assistant."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": line,
                 "created_at": when + timedelta(minutes=i)} for i, line in enumerate(lines)]
    return store.add_messages(sid, messages, user_id=user, triggers=triggers, background=False)


def timeline_of(fact):
    return [(h.value, h.valid_from, h.valid_to) for h in fact.history]


def assert_munich_with_berlin_before(store):
    location = store.get_fact("location", user_id=U)
    assert (location.value, location.observed_at) == ("Munich", MOVED)
    assert timeline_of(location) == [("Berlin", LIVED, MOVED)]
    mirror = store.get(location.item_id, user_id=U)
    assert mirror.content.endswith("Munich") and mirror.observed_at == MOVED


@pytest.fixture
def today(clock):
    clock.set(TODAY)
    return clock


def test_an_older_session_extracted_later_goes_into_the_history_rules(store, today):
    moved = said(store, "move", MOVED, "Remember that I moved to Munich.", "Noted!", triggers=True)
    assert moved.report is not None and moved.report.added == 1  # extracted at once ("remember that")
    said(store, "intro", LIVED, "Hi! My name is Tomas and I live in Berlin.", "Hello Tomas!")
    report = store.extract_session("intro", user_id=U)
    assert [c.action for c in report.changes if c.fact.key == "location"] == ["history"]
    assert_munich_with_berlin_before(store)
    berlin = store.get_fact("location", user_id=U).history[0]
    assert (berlin.source_session_id, berlin.source_message_id) == ("intro", "1")  # the statement it came from
    assert store.get_fact("name", user_id=U).observed_at == LIVED


def test_an_older_session_extracted_later_goes_into_the_history_chat_model(store, today):
    chat(store, reply(("profile", "location", "Munich", "user_explicit")), "Tomas lives in Munich.",
         {"facts": [{"category": "profile", "key": "location", "value": "Berlin", "source": "user_explicit",
                     "source_context": "I live in Berlin"},
                    {"category": "profile", "key": "name", "value": "Tomas", "source": "user_explicit"}],
          "notes": []},
         "Tomas lives in Munich.")
    said(store, "move", MOVED, "Remember that I moved to Munich.", "Noted!", triggers=True)
    said(store, "intro", LIVED, "Hi! My name is Tomas and I live in Berlin.", "Hello Tomas!")
    store.extract_session("intro", user_id=U)
    assert_munich_with_berlin_before(store)


def test_the_newer_statement_still_wins_in_processing_order(store, today):
    said(store, "intro", LIVED, "Hi! My name is Tomas and I live in Berlin.", "Hello Tomas!")
    store.extract_session("intro", user_id=U)
    said(store, "move", MOVED, "Remember that I moved to Munich.", "Noted!", triggers=True)
    assert_munich_with_berlin_before(store)


def test_upsert_fact_observed_at_orders_values_by_when_they_were_said(store, today):
    def put(value, when=None):
        return store.upsert_fact(user_id=U, category="profile", key="location", value=value, observed_at=when)

    assert put("Munich", MOVED).action == "added"
    older = put("Berlin", LIVED)
    assert (older.action, older.fact.value, older.previous_value) == ("history", "Munich", None)
    assert put("Berlin", LIVED + timedelta(days=3)).action == "unchanged"  # Berlin was the value then
    hamburg = datetime(2026, 10, 15, tzinfo=UTC)
    assert put("Hamburg", hamburg).action == "history"  # between the two: cuts Berlin short
    assert timeline_of(store.get_fact("location", user_id=U)) == [("Berlin", LIVED, hamburg),
                                                                  ("Hamburg", hamburg, MOVED)]
    earlier_munich = datetime(2026, 10, 20, tzinfo=UTC)
    assert put("Munich", earlier_munich).action == "unchanged"  # Munich was said earlier than known
    location = store.get_fact("location", user_id=U)
    assert location.observed_at == earlier_munich
    assert timeline_of(location) == [("Berlin", LIVED, hamburg), ("Hamburg", hamburg, earlier_munich)]
    now = put("Oslo")  # default: now
    assert (now.action, now.previous_value, now.fact.observed_at) == ("updated", "Munich", TODAY)
    assert timeline_of(store.get_fact("location", user_id=U))[-1] == ("Munich", earlier_munich, TODAY)
    later = put("Paris", TODAY + timedelta(days=30))  # the future counts as now
    assert (later.action, later.fact.observed_at) == ("updated", TODAY)


def test_observed_at_is_validated(store, today):
    from navi_memory.errors import ValidationError

    with pytest.raises(ValidationError, match="observed_at"):
        store.upsert_fact(user_id=U, category="profile", key="location", value="Oslo", observed_at="yesterday")
    assert store.get_all_facts(user_id=U) == []


def test_place_is_pure_and_keeps_the_timeline_ordered():
    t = [datetime(2026, m, 1, tzinfo=UTC) for m in range(1, 8)]
    current = {"value": "E", "observed_at": t[5]}
    history = [{"id": 1, "value": "A", "valid_from": t[0], "valid_to": t[2]},
               {"id": 2, "value": "C", "valid_from": t[2], "valid_to": t[5]}]
    assert timeline.place(current, history, {"value": "F"}, t[6]).insert[0].valid_to == t[6]
    before_all = timeline.place(current, history, {"value": "Z"}, t[0] - timedelta(days=1))
    assert (before_all.action, before_all.insert[0].valid_to, before_all.edits) == ("history", t[0], {})
    inside = timeline.place(current, history, {"value": "B"}, t[1])
    assert (inside.insert[0].valid_from, inside.insert[0].valid_to, inside.edits) == (t[1], t[2], {1: {"valid_to": t[1]}})
    moves_next = timeline.place(current, history, {"value": "C"}, t[1])
    assert (moves_next.action, moves_next.edits) == ("history", {1: {"valid_to": t[1]}, 2: {"valid_from": t[1]}})


# -- retrieval: a turn a newer fact superseded ranks below it and is marked as past -----------------

@pytest.mark.parametrize("order", ["in order", "older session later"])
def test_a_superseded_turn_ranks_below_the_current_fact_and_is_marked_past(store, today, order):
    from navi_memory import prompt

    def intro():
        said(store, "intro", LIVED, "Hi! My name is Tomas and I live in Berlin.", "Hello Tomas!")
        store.extract_session("intro", user_id=U)

    def move():
        said(store, "move", MOVED, "Remember that I moved to Munich.", "Noted!", triggers=True)
        store.extract_session("move", user_id=U)  # the session ends: its last turn is stored too

    steps = [intro, move] if order == "in order" else [move, intro]
    for step in steps:
        step()
    results = store.search("where do I live Berlin Munich", user_id=U, limit=10)
    by_content = {r.content: r for r in results}
    fact = next(r for r in results if r.kind == "fact" and r.fact and r.fact["key"] == "location")
    turn = next(r for r in results if "I live in Berlin" in r.content)
    assert turn.superseded_by == "location: Munich" and turn.scores["superseded"] < 0
    assert results.index(turn) > results.index(fact) and turn.score < fact.score
    moved = next(r for c, r in by_content.items() if "moved to Munich" in c and r.kind == "item")
    assert moved.superseded_by is None  # the turn that said the current value is current
    block = prompt.relevant_memory_block(results)
    [line] = [ln for ln in block.splitlines() if "I live in Berlin" in ln]
    assert "earlier: superseded by location: Munich" in line
    [fact_line] = [ln for ln in block.splitlines() if ln.endswith("location: Munich")]
    assert "superseded" not in fact_line
    if order == "in order":  # the UI's search page and the REST API show it too
        from starlette.testclient import TestClient

        from navi_memory.ui.app import create_app

        client = TestClient(create_app(store), base_url="http://127.0.0.1")
        query = {"q": "where do I live Berlin Munich", "all": "1"}
        assert "(earlier: superseded by location: Munich)" in client.get(f"/users/{U}/search", params=query).text
        found = client.get(f"/api/users/{U}/search", params=query).json()["results"]
        assert [r["superseded_by"] for r in found if "I live in Berlin" in r["content"]] == ["location: Munich"]


def test_a_search_across_users_marks_each_users_superseded_turns_by_their_own_facts(store, today):
    """An administrator's search (``all_users``) marks a turn by its own user's past statements:
    Tomas moved from Berlin to Munich, Anna still lives in Berlin and said so in a session of the
    same id and message number: only Tomas's turn is past."""
    for user in (U, "anna"):
        said(store, "intro", LIVED, "Hi! My name is Tomas and I live in Berlin." if user == U
             else "Hi! My name is Anna and I live in Berlin.", "Hello!", user=user)
        store.extract_session("intro", user_id=user)
    said(store, "move", MOVED, "Remember that I moved to Munich.", "Noted!", triggers=True)
    store.extract_session("move", user_id=U)
    assert store.get_fact("location", user_id="anna").value == "Berlin"
    results = store.search("where do I live Berlin Munich", all_users=True, limit=20, min_score=0)
    tomas = next(r for r in results if "Tomas and I live in Berlin" in r.content)
    anna = next(r for r in results if "Anna and I live in Berlin" in r.content)
    assert tomas.superseded_by == "location: Munich" and tomas.scores["superseded"] < 0
    assert anna.superseded_by is None and "superseded" not in anna.scores
    munich = next(r for r in results if r.kind == "fact" and r.content.endswith("Munich"))
    assert results.index(tomas) > results.index(munich)
    assert {r.superseded_by for r in store.search("where do I live Berlin Munich", user_id="anna", min_score=0)} \
        == {None}


def test_demote_is_pure_and_keeps_other_results_in_order():
    from navi_memory.models import SearchResult
    from navi_memory.retrieval import superseded

    def result(i, score, kind="item"):
        return SearchResult(id=i, content=f"r{i}", snippet="", theme="t", type="note", created_at=TODAY, score=score,
                            signals={}, scores={}, kind=kind)

    turn_row = {"id": 1, "user_id": U, "fact_id": None, "source_ref": {"session_id": "s", "first_seq": 1, "last_seq": 2}}
    past = [{"user_id": U, "session_id": "s", "message_id": "2", "value": "Berlin", "current_value": "Munich",
             "key": "location", "item_id": 3}]
    fact_row = {"id": 3, "user_id": U, "fact_id": 7, "source_ref": {"session_id": "s", "first_seq": 2, "last_seq": 2}}
    assert superseded.replaced_turns([turn_row, fact_row], past) == {1: past[0]}  # a fact's item is no turn
    said = superseded.replaced_by(turn_row, past)
    assert said is past[0]
    assert superseded.replaced_by({**turn_row, "source_ref": {"session_id": "s", "first_seq": 3, "last_seq": 4}},
                                  past) is None  # another message of the session
    assert superseded.replaced_by(turn_row, [{**past[0], "current_value": "berlin"}]) is None  # said again since
    assert superseded.replaced_by({**turn_row, "user_id": "anna"}, past) is None  # another user's session "s"
    out = superseded.demote([result(1, 0.9), result(2, 0.7), result(3, 0.6, "fact")], {1: said})
    assert [r.id for r in out] == [2, 3, 1] and out[2].superseded_by == "location: Munich"
    assert out[2].score < out[1].score and out[2].scores["superseded"] < 0
    # the order follows the rank key, not the relevance score: results 4 and 5 keep their order
    ranked = [SearchResult(id=i, content=f"r{i}", snippet="", theme="t", type="note", created_at=TODAY, score=s,
                           signals={}, scores={"rank": k}, kind=kind)
              for i, s, k, kind in ((1, 0.9, 2.0, "item"), (4, 0.2, 1.5, "item"), (5, 0.8, 1.2, "item"),
                                    (3, 0.6, 1.0, "fact"))]
    out = superseded.demote(ranked, {1: said})
    assert [r.id for r in out] == [4, 5, 3, 1] and out[3].scores["rank"] < out[2].scores["rank"]


# -- import: the same rule for a fact already on file ----------------------------------------------

def test_import_places_statements_of_a_fact_on_file_by_when_they_were_said(store, today, new_db_url, fake_embeddings):
    from navi_memory import MemoryStore

    from .test_transfer import export

    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich", observed_at=MOVED)
    with MemoryStore.open(new_db_url(), embeddings=fake_embeddings, clock=today) as other:
        other.upsert_fact(user_id=U, category="profile", key="location", value="Berlin", observed_at=LIVED)
        older = export(other, user_id=U)
        later = TODAY - timedelta(days=2)
        other.upsert_fact(user_id=U, category="profile", key="location", value="Hamburg", observed_at=later)
        newer = export(other, user_id=U)
    [record] = [r for r in older if r.get("type") == "fact"]
    assert record["observed_at"].startswith("2026-10-01")
    report = store.import_records(older)
    assert (report.skipped.get("fact"), report.merged) == (1, 1)
    assert_munich_with_berlin_before(store)  # the older value went into the history, not over Munich
    assert store.import_records(older).merged == 0  # again: nothing new
    assert store.import_records(newer).merged == 1  # Hamburg, said after Munich: the value now
    location = store.get_fact("location", user_id=U)
    assert (location.value, location.observed_at) == ("Hamburg", later)
    assert timeline_of(location) == [("Berlin", LIVED, MOVED), ("Munich", MOVED, later)]


def test_statement_of_finds_the_message_a_model_fact_quotes():
    from navi_memory.models import Message
    from navi_memory.pipeline import transcript

    messages = [Message(role="user", content="Hi! My name is Tomas and I live in Berlin.", seq=1, created_at=LIVED),
                Message(role="assistant", content="Hello Tomas, Berlin is lovely.", seq=2, created_at=LIVED),
                Message(role="user", content="I also write Rust at work.", seq=3, created_at=MOVED)]
    assert transcript.statement_of("I live in Berlin", messages).seq == 1
    assert transcript.statement_of("writes Rust at work", messages).seq == 3
    assert transcript.statement_of("likes tea", messages) is None
    assert transcript.statement_of(None, messages) is None
