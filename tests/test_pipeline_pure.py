"""The pipeline's pure functions, without a database: messages, transcript, rules, parsing, dedup,
summary text and triggers."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from navi_memory import Message, ToolCall, ValidationError
from navi_memory.pipeline import PipelineOptions, dedup, rules, sessions, summary, transcript, triggers
from navi_memory.pipeline.extract import ExtractedFact, find_json, interpret, parse_reply
from navi_memory.pipeline.prompts import EXTRACT_SYSTEM, extraction_messages, known_facts_block

NOW = datetime(2025, 1, 15, 12, 0, tzinfo=timezone.utc)


# -- message formats --------------------------------------------------------------------------

def test_openai_messages_with_tool_calls_are_normalised():
    rows = sessions.normalize_messages([
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": [{"type": "text", "text": "What OS"}, {"type": "text", "text": "do I run?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"uname -a\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Linux box 6.8.0-arch1"},
    ], 32768)
    assert [r["role"] for r in rows] == ["system", "user", "assistant", "tool"]
    assert rows[1]["content"] == "What OS\ndo I run?"
    assert rows[2]["content"] == "" and rows[2]["tool_calls"] == [
        {"id": "c1", "name": "shell", "arguments": "{\"cmd\": \"uname -a\"}"}]
    assert rows[3]["tool_call_id"] == "c1"


def test_langchain_messages_dicts_and_objects_are_normalised():
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

    objects = [HumanMessage("I use fish shell"),
               AIMessage("", tool_calls=[{"name": "read_config", "args": {"path": "~/.config/fish"}, "id": "t1"}]),
               ToolMessage("set -g theme dark", tool_call_id="t1")]
    for raw in (objects, messages_to_dict(objects), [{"type": m.type, "content": m.content,
                                                      "tool_calls": getattr(m, "tool_calls", None),
                                                      "tool_call_id": getattr(m, "tool_call_id", None)}
                                                     for m in objects]):
        rows = sessions.normalize_messages(raw, 32768)
        assert [r["role"] for r in rows] == ["user", "assistant", "tool"]
        assert rows[1]["tool_calls"] == [{"id": "t1", "name": "read_config", "arguments": '{"path": "~/.config/fish"}'}]
        assert rows[2]["tool_call_id"] == "t1"


@pytest.mark.parametrize("raw, message", [
    ("hello", "must be a list"),
    ([{"role": "robot", "content": "x"}], "message 0: unknown role"),
    ([{"role": "user", "content": "a\x00b"}], "NUL"),
    ([42], "must be a mapping"),
    ([{"role": "user", "content": "x", "created_at": "yesterday"}], "created_at"),
    ([{"role": "assistant", "tool_calls": "x"}], "tool_calls must be a list"),
])
def test_bad_messages_are_rejected_naming_the_message(raw, message):
    with pytest.raises(ValidationError, match=message):
        sessions.normalize_messages(raw, 32768)


# -- transcript -------------------------------------------------------------------------------

def conversation(*messages: Message) -> list[Message]:
    for seq, m in enumerate(messages, 1):
        m.seq = seq
    return list(messages)


def test_transcript_lines_follow_the_seed_rules():
    msgs = conversation(
        Message("system", "secret system prompt"),
        Message("user", "Check my disk"),
        Message("assistant", "Running df.", tool_calls=[ToolCall("df", "x" * 300, "c1")]),
        Message("tool", "y" * 800, tool_call_id="c1"),
        Message("tool", "orphan output", tool_call_id="zz"),
    )
    text = transcript.render(msgs)
    lines = text.splitlines()
    assert "secret" not in text
    assert lines[0] == "User: Check my disk" and lines[1] == "Assistant: Running df."
    assert lines[2] == "[Tool call] df(" + "x" * 200 + "…)"
    assert lines[3] == "[Tool result] df: " + "y" * 500 + " …[truncated]"
    assert lines[4] == "[Tool result] unknown: orphan output"


def test_long_transcript_keeps_head_and_tail_within_the_cap():
    msgs = conversation(*[Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "z" * 300) for i in range(120)])
    text = transcript.render(msgs)
    assert len(text) <= transcript.MAX_TRANSCRIPT
    assert text.startswith("User: turn 0 ") and text.rstrip().endswith("z" * 50)
    assert "turn 119" in text and "turn 60 " not in text
    assert transcript.GAP.strip() in text


def test_cap_is_exact_for_text_without_newlines():
    out = transcript.cap("a" * 50_000, 1000)
    assert len(out) <= 1000 and out.startswith("a") and out.endswith("a")


def test_context_is_shown_before_new_messages():
    old = conversation(Message("user", "I use vim"), Message("assistant", "ok"))
    new = [Message("user", "and I prefer tabs", seq=3)]
    text = transcript.render(new, context=old)
    assert text.splitlines()[0] == transcript.CONTEXT_HEADER
    assert text.index("I use vim") < text.index(transcript.NEW_HEADER) < text.index("and I prefer tabs")


def test_turns_hold_back_the_open_turn_unless_final():
    msgs = conversation(Message("user", "q1"), Message("assistant", "a1"), Message("user", "q2"))
    groups, upto = transcript.turns(msgs, final=False)
    assert [[m.content for m in g] for g in groups] == [["q1", "a1"]] and upto == 2
    groups, upto = transcript.turns(msgs, final=True)
    assert len(groups) == 2 and upto == 3


# -- rules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Hi! My name is eugene and I live in Berlin.", [("profile", "name", "Eugene"), ("profile", "location", "Berlin")]),
    ("Call me Gene, please.", [("profile", "name", "Gene")]),
    ("I moved to Munich last month.", [("profile", "location", "Munich")]),
    ("Hi! I'm Maya. I just moved to Lisbon for a backend job.", [("profile", "name", "Maya"),
                                                                 ("profile", "location", "Lisbon")]),
    ("I live in New York with my wife and kids", [("profile", "location", "New York")]),
    ("I'm Sorry. I'm Tired.", []),
    ("I'm excited about it. i'm maya", []),
    ("I prefer dark mode in all my editors.", [("preferences", "editor_theme", "dark mode in all my editors")]),
    ("My favourite color is teal.", [("preferences", "favorite_color", "teal")]),
    ("I'm 34 years old.", [("profile", "age", "34")]),
    ("I work at Siemens since 2019", [("profile", "employer", "Siemens")]),
    ("Please remember that my name is Bob.", [("profile", "name", "Bob")]),
    ("Remember that my sister's birthday is June 5.", [("other", "sister_birthday", "June 5")]),
    ("Remember that I take the 8:15 train.", [("other", "commute_train", "I take the 8:15 train")]),
    ("call me back later", []),
    ("I don't live in Paris anymore.", []),
    ("Do you remember where I live?", []),
    ("My name is not Bob.", []),
    ("What's my name?", []),
])
def test_explicit_statements(text, expected):
    assert [(f.category, f.key, f.value) for f in rules.extract_text(text)] == expected
    assert all(f.source == "user_explicit" for f in rules.extract_text(text))


@pytest.mark.parametrize("text, key", [
    # keys are short snake_case nouns for the topic, never a run of the sentence's words
    ("I prefer dark mode in every editor.", "editor_theme"),
    ("I prefer dark mode.", "theme"),
    ("I prefer short answers.", "short_answers"),
    ("I prefer tea over coffee.", "drink"),
    ("I prefer tabs over spaces.", "indentation"),
    ("I prefer window seats on long flights.", "seat"),
    ("I usually prefer meetings in the morning.", "meetings"),
    ("Remember that I usually take the early bus to work.", "commute_bus"),
    ("Remember that I'm allergic to peanuts.", "allergies"),
    ("Remember that we are vegetarian.", "diet"),
    ("Remember that I have a dog named Biscuit.", "dog"),
    ("Remember that I'm training for the Berlin marathon in September.", "berlin_marathon"),
    ("Remember that we're moving in June.", "moving"),
    ("Please remember that my passport expires in March.", "passport"),
    ("Remember that my daughter's school starts at 8.", "daughter_school"),
    ("Keep in mind that I hate cilantro.", "cilantro"),
])
def test_rule_keys_read_as_nouns(text, key):
    (found,) = rules.extract_text(text)
    assert found.key == key
    assert re.fullmatch(r"[a-z]+(_[a-z]+){0,2}", found.key)
    assert found.value[0].isalnum() and not found.value.endswith(".")


def test_rules_read_only_user_messages_and_later_statements_win():
    msgs = [Message("assistant", "My name is Navi."), Message("user", "I live in Berlin."),
            Message("tool", "my name is root"), Message("user", "Actually I live in Potsdam.")]
    assert [(f.key, f.value) for f in rules.extract(msgs)] == [("location", "Potsdam")]


def test_prefilter():
    assert not rules.worth_extracting([Message("user", "What is the capital of France?"),
                                       Message("assistant", "Paris."), Message("user", "Thanks!")])
    assert not rules.worth_extracting([Message("user", "Translate 'hello' to German.")])
    assert rules.worth_extracting([Message("user", "I need a budget for my trip")])
    assert rules.worth_extracting([Message("user", "run it"), Message("tool", "Ubuntu 24.04")])
    assert rules.asks_to_remember("ok. Remember that I take the 8:15 train.")
    assert not rules.asks_to_remember("Do you remember my train?")


# -- reply parsing ----------------------------------------------------------------------------

def test_parse_clean_prose_fenced_and_legacy_replies():
    clean = parse_reply('{"facts": [{"category": "profile", "key": "Home City", "value": "Berlin", '
                        '"source": "user"}], "notes": ["Plans a trip to Japan."]}')[0]
    assert clean.facts == [ExtractedFact("profile", "home_city", "Berlin", "user_explicit", 90)]
    assert clean.notes == ["Plans a trip to Japan."]
    prose = parse_reply('Sure! Here it is:\n```json\n[{"category": "Hobby", "key": "sport", "value": "climbing",'
                        ' "source": "tool_result"}]\n```\nAnything else?')[0]
    assert prose.facts == [ExtractedFact("other", "sport", "climbing", "tool_call", 95)]
    assert parse_reply('noise {not json} then {"facts": [], "notes": []}')[0].facts == []


@pytest.mark.parametrize("text, problem", [
    ('{"facts": [{"category": "profile", "key": "name", "value": "Eu', "cut off"),
    ("I can't help with that.", "no JSON"),
    ('{"facts": [{"foo": 1}]}', "usable"),
    ('{"memories": []}', "no \"facts\" list"),
    ('{"facts": "none"}', "must be lists"),
])
def test_unusable_replies_name_the_problem(text, problem):
    result, found = parse_reply(text)
    assert result is None and problem in found


def test_fact_validation_maps_categories_sources_and_confidence():
    result, _ = interpret({"facts": [
        {"category": "preference", "key": "theme", "value": "dark"},
        {"category": "zodiac", "key": "sign", "value": "leo", "source": "auto_discovery"},
        {"category": "tech", "key": "os", "value": "Arch Linux", "source": "weird"},
        {"category": "profile", "key": "age", "value": 34},
        {"category": "profile", "key": "", "value": "x"},
        {"category": "profile", "key": "name", "value": "A"}, {"category": "profile", "key": "name", "value": "B"},
    ]})
    assert [(f.category, f.key, f.value, f.source, f.confidence) for f in result.facts] == [
        ("preferences", "theme", "dark", "conversation", 70), ("other", "sign", "leo", "auto_discovery", 95),
        ("technical", "os", "Arch Linux", "conversation", 70), ("profile", "age", "34", "conversation", 70),
        ("profile", "name", "B", "conversation", 70)]
    assert result.dropped == 1


def test_find_json_prefers_the_first_complete_value():
    assert find_json('x [1, 2] {"a": 1}') == ([1, 2], None)


def test_prompt_carries_known_facts_and_the_seed_rules():
    msgs = extraction_messages("User: hi", [{"category": "profile", "key": "name", "value": "Eugene"}])
    assert msgs[0] == ("system", EXTRACT_SYSTEM)
    assert "profile/name: Eugene" in msgs[1][1] and msgs[1][1].endswith("User: hi")
    assert "CONVERSATION DATE" not in msgs[1][1]
    dated = extraction_messages("User: hi", [], "Monday, 23 November 2026 (UTC)")[1][1]
    assert "CONVERSATION DATE: Monday, 23 November 2026 (UTC)\n\nCONVERSATION EXCERPT:\nUser: hi" in dated
    for rule in ("tool result", "passing states", "other people", "already on file", 'never as "tomorrow"'):
        assert rule in EXTRACT_SYSTEM
    assert known_facts_block([{"category": "other", "key": f"k{i}", "value": "v" * 50} for i in range(500)],
                             1000).endswith("(more facts on file, not shown)")


# -- dedup ------------------------------------------------------------------------------------

def fact(category, key, value, source="conversation", **extra):
    return {"id": 1, "item_id": 1, "category": category, "key": key, "value": value, "source": source,
            "confidence": 70, **extra}


def candidate(category, key, value, source="conversation"):
    return ExtractedFact(category, key, value, source)


def test_dedup_same_key():
    known = [fact("profile", "location", "Berlin")]
    assert dedup.decide(candidate("profile", "location", "berlin."), known).action == "unchanged"
    assert dedup.decide(candidate("profile", "location", "Munich"), known).action == "update"


def test_dedup_equivalent_keys():
    known = [fact("profile", "location", "Berlin"), fact("technical", "operating_system", "Arch")]
    for key, value, action in (("home_city", "Berlin", "unchanged"), ("city", "Munich", "update"),
                               ("current_location", "Munich", "update")):
        decision = dedup.decide(candidate("profile", key, value), known)
        assert (decision.action, decision.target["key"]) == (action, "location")
    assert dedup.decide(candidate("technical", "os", "Arch"), known).target["key"] == "operating_system"
    assert dedup.decide(candidate("preferences", "favorite_color", "blue"),
                        [fact("preferences", "car_color", "blue")]).action == "add"


def test_dedup_tool_results_outrank_chat():
    known = [fact("technical", "os", "Ubuntu 24.04", source="tool_call")]
    assert dedup.decide(candidate("technical", "os", "Windows"), known).action == "keep"
    assert dedup.decide(candidate("technical", "os", "Fedora", "user_explicit"), known).action == "update"


def test_dedup_by_similarity_then_judge():
    drink = fact("preferences", "coffee_order", "oat milk latte")
    same_value = dedup.decide(candidate("preferences", "usual_drink", "Oat milk latte"), [drink], [(drink, 0.9)])
    assert (same_value.action, same_value.target["key"]) == ("unchanged", "coffee_order")
    other_value = dedup.decide(candidate("preferences", "morning_drink", "flat white"), [drink], [(drink, 0.85)])
    assert other_value.action == "judge"
    assert dedup.resolve(other_value, candidate("preferences", "morning_drink", "flat white"), True).action == "update"
    assert dedup.resolve(other_value, candidate("preferences", "morning_drink", "flat white"), False).action == "add"
    assert dedup.decide(candidate("preferences", "usual_drink", "tea"), [drink], [(drink, 0.5)]).action == "add"


def test_dedup_verdict_parsing():
    assert dedup.parse_verdict('Result: {"same": [1, 3, 9, "2", true]}', 3) == {1, 3}
    assert dedup.parse_verdict("no idea", 3) == set()


# -- summary ----------------------------------------------------------------------------------

def test_summary_text_is_tidied_and_capped():
    text = summary.tidy("# Profile\nThe user is Eugene.\n\n" + "\n\n".join(f"Paragraph {i}." for i in range(6)))
    assert not text.startswith("#") and text.count("\n\n") == 3
    long = " ".join(f"word{i}." for i in range(1000))
    assert len(summary.clip_words(long).split()) <= 400


@pytest.mark.parametrize("reply", [" ".join(["https://example.com/" + "a" * 60] * 400), "b" * 10_000,
                                   "The user likes tea. " + "c" * 9_000])
def test_a_summary_of_long_words_is_capped_in_characters_too(reply: str):
    # it goes into every session's prompt: 400 words of 80 characters were 32 KB a turn
    text = summary.tidy(reply)
    assert len(text) <= summary.MAX_CHARS and text.endswith("…")
    assert reply.startswith(text[:-1].rstrip())


def test_composed_summary_without_llm():
    facts = [fact("profile", "name", "Eugene"), fact("preferences", "editor", "vim"), fact("other", "k", "v")]
    text = summary.compose(facts)
    assert text.splitlines()[0] == "About the user: name: Eugene."
    assert "Preferences: editor: vim." in text and len(text.split()) <= 400
    natural = summary.compose([fact("preferences", "editor_theme", "dark mode in every editor"),
                               fact("preferences", "short_answers", "short answers"),
                               fact("other", "commute_train", "I take the 8:15 train"),
                               fact("other", "sister_birthday", "June 5")])
    assert natural == ("Preferences: editor theme: dark mode in every editor; short answers.\n\n"
                       "Also worth knowing: I take the 8:15 train; sister birthday: June 5.")


def test_summary_needed_only_when_facts_changed():
    facts = [fact("profile", "name", "Eugene", updated_at=NOW)]
    assert not summary.needs_update(False, [], None)
    assert summary.needs_update(False, facts, None)
    assert summary.needs_update(True, facts, {"created_at": NOW + timedelta(hours=1)})
    assert not summary.needs_update(False, facts, {"created_at": NOW})
    assert summary.needs_update(False, facts, {"created_at": NOW - timedelta(seconds=1)})


# -- triggers ---------------------------------------------------------------------------------

def test_staleness():
    base = {"last_active": NOW - timedelta(minutes=31), "message_count": 4, "extracted_at": None, "extracted_seq": 0}
    assert triggers.is_stale(base, NOW, 30)
    assert not triggers.is_stale({**base, "last_active": NOW - timedelta(minutes=29)}, NOW, 30)
    done = {**base, "extracted_at": NOW - timedelta(minutes=20), "extracted_seq": 4, "chunked_seq": 4}
    assert not triggers.is_stale(done, NOW, 30)
    assert triggers.is_stale({**done, "chunked_seq": 2}, NOW, 30)  # a turn still waits to be stored
    assert triggers.is_stale({**done, "extracted_at": NOW - timedelta(minutes=40)}, NOW, 30)
    assert triggers.is_stale({**done, "extracted_seq": 3}, NOW, 30)
    assert not triggers.is_stale({**base, "message_count": 0}, NOW, 30)


def test_in_conversation_triggers():
    session = {"user_messages": 5, "extracted_user_messages": 0}
    assert triggers.in_conversation(session, [{"role": "user", "content": "hi"}], 5) == ["every_n"]
    assert triggers.in_conversation({**session, "extracted_user_messages": 1}, [], 5) == []
    assert triggers.in_conversation(session, [], 0) == []
    assert triggers.in_conversation({"user_messages": 1}, [{"role": "user", "content": "Remember that I'm vegan"}],
                                    5) == ["remember"]


def test_pipeline_options_are_checked():
    with pytest.raises(ValidationError):
        PipelineOptions(dedup_threshold=1.5)
    with pytest.raises(ValidationError):
        PipelineOptions(extract_every=-1)
    for odd in (float("nan"), float("inf")):  # NaN idles never go stale; neither would a session
        with pytest.raises(ValidationError, match="stale_minutes must be a finite number"):
            PipelineOptions(stale_minutes=odd)


@pytest.mark.parametrize("name", ["NAVI_MEMORY_STALE_MINUTES", "NAVI_MEMORY_CHAT_TIMEOUT",
                                  "NAVI_MEMORY_EMBEDDING_TIMEOUT", "NAVI_MEMORY_DEDUP_THRESHOLD"])
@pytest.mark.parametrize("raw", ["-5", "nan", "inf"])
def test_settings_refuse_negative_and_non_finite_numbers(name, raw):
    from navi_memory import ConfigurationError, Settings

    with pytest.raises(ConfigurationError, match=f"{name} must be a finite number of at least 0, got '{raw}'"):
        Settings.from_env({name: raw})


# -- the chat model -----------------------------------------------------------------------------

def test_chat_model_resolution():
    from navi_memory import ConfigurationError, Settings
    from navi_memory.pipeline.llm import ChatClient, resolve_chat_model

    base = Settings(url="sqlite:///:memory:")
    assert resolve_chat_model(None, base) is None and resolve_chat_model("none", base) is None
    assert resolve_chat_model(False, Settings(url="x", chat_model="llama3.2")) is None
    client = resolve_chat_model(None, Settings(url="x", chat_model="ollama:llama3.2:3b", chat_host="http://h:1",
                                               chat_api_key="sekrit"))
    assert isinstance(client, ChatClient) and client.name == "ChatOllama:llama3.2:3b"
    assert client._model is None  # built on first use
    model = client.model
    assert (model.model, model.base_url) == ("llama3.2:3b", "http://h:1")
    assert model.client_kwargs["headers"] == {"Authorization": "Bearer sekrit"}
    assert "sekrit" not in repr(Settings(url="x", chat_api_key="sekrit"))
    with pytest.raises(ConfigurationError):
        resolve_chat_model(object(), base)


async def test_chat_client_failures_become_extraction_errors():
    import asyncio

    from navi_memory import ExtractionError
    from navi_memory.pipeline.llm import ChatClient

    from .chat_fakes import ScriptedChat

    client = ChatClient.wrap(ScriptedChat(script=[RuntimeError("boom")]))
    with pytest.raises(ExtractionError, match="RuntimeError: boom"):
        client.invoke("extract", [("human", "hi")])
    slow = ChatClient.wrap(ScriptedChat(script=["late"], agate=asyncio.Event()), timeout=0.05)
    with pytest.raises(ExtractionError, match="TimeoutError"):
        await slow.ainvoke("summary", [("human", "hi")])
    reply = ChatClient.wrap(ScriptedChat(script=["hello"], usage=None)).invoke("summary", [("human", "x" * 400)])
    assert (reply.text, reply.input_tokens, reply.output_tokens, reply.estimated) == ("hello", 101, 2, True)


def test_content_words_and_jaccard():
    from navi_memory.retrieval.words import content_words, jaccard, stem

    assert [stem(w) for w in ("climbing", "tuesdays", "takes", "lattes", "boxes", "studies", "running", "class")] == [
        "climb", "tuesday", "take", "latte", "box", "study", "run", "class"]
    assert content_words("I go climbing on Tuesday") == {"climb", "tuesday"}
    assert content_words("Remember: I take the 8:15 train") == {"remember", "8", "15", "train"}
    assert jaccard(content_words("climbing again this Tuesday"), content_words("Tuesday climbing session")) == 2 / 3
    assert jaccard(set(), {"a"}) == 0.0


def test_a_season_ends_the_value_like_a_week_does():
    from navi_memory.pipeline.rules import extract_text

    assert [(f.key, f.value) for f in extract_text("I moved to Lisbon last spring, I love the light.")] == [
        ("location", "Lisbon")]


def test_an_excerpt_is_dated_by_its_first_and_last_day():
    from datetime import datetime, timezone

    from navi_memory.models import Message
    from navi_memory.pipeline.transcript import dated
    from navi_memory.core.timeutil import zone

    monday = datetime(2026, 11, 23, 22, tzinfo=timezone.utc)
    one_day = [Message("user", "hi", created_at=monday), Message("assistant", "hello", created_at=monday)]
    assert dated(one_day, timezone.utc) == "Monday, 23 November 2026 (UTC)"
    assert dated(one_day, zone("Europe/Berlin")) == "Monday, 23 November 2026 (Europe/Berlin)"
    assert dated(one_day, zone("Asia/Tokyo")) == "Tuesday, 24 November 2026 (Asia/Tokyo)"
    later = [*one_day, Message("user", "back", created_at=datetime(2026, 11, 26, 9, tzinfo=timezone.utc))]
    assert dated(later, timezone.utc) == "from Monday, 23 November 2026 to Thursday, 26 November 2026 (UTC)"
    assert dated([Message("user", "no time")], timezone.utc) is None
