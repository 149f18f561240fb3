"""``navi-memory bench locomo --answer-model``: the answer a chat model gives with the injected memory,
judged (J) and scored by token F1. No model runs here: scripted chat models (``chat_fakes``) and a
local server speaking OpenAI's API stand in for it; the scoring is checked on hand-made cases."""

from __future__ import annotations

import json

import pytest

from navi_memory import ConfigurationError, MemoryStore, Settings
from navi_memory.bench import locomo_answer
from navi_memory.bench.locomo_answer import AnswerRun, chat_client, judge_label, measure, normalise, token_f1
from navi_memory.bench.locomo_data import turn_items
from navi_memory.cli.main import main
from navi_memory.errors import ExtractionError
from navi_memory.pipeline.llm import ChatClient, RetryPolicy

from .chat_fakes import ScriptedChat
from .openai_server import FakeOpenAI
from .test_bench import _locomo_sample


def test_token_f1_normalises_like_squad():
    assert normalise("The  Eiffel-Tower, in PARIS!") == "eiffeltower in paris"
    assert normalise("an apple a day") == "apple day"
    assert normalise("Theatre") == "theatre"  # an article only as a whole word
    assert token_f1("Biscuit", "biscuit.") == 1.0
    assert token_f1("the puppy Biscuit", "Biscuit") == pytest.approx(2 * 0.5 * 1 / 1.5)  # P 1/2, R 1
    assert token_f1("7 May 2023", "May 7, 2023") == 1.0  # bags of tokens: order does not count
    assert token_f1("Porto", "Lisbon") == 0.0
    assert token_f1("a", "the") == 1.0 and token_f1("", "Lisbon") == 0.0  # empty after normalisation
    assert token_f1("go go", "go") == pytest.approx(2 * 0.5 * 1 / 1.5)  # a repeated token counts once
    assert token_f1("2022", str(2022)) == 1.0


@pytest.mark.parametrize(("reply", "label"), [
    ("CORRECT", "CORRECT"), ("wrong.", "WRONG"), ("INCORRECT", "WRONG"),
    ("The answer names the same dog.\nLABEL: CORRECT", "CORRECT"),
    ("The reply says it is not wrong, but the date differs.\nLabel: **WRONG**", "WRONG"),
    ("label: correct\n...on reflection\nLABEL: WRONG", "WRONG"),  # the last label line
    ('{"reasoning": "same city", "label": "CORRECT"}', "CORRECT"),
    ("<think>maybe WRONG? no.</think>The answer is CORRECT.", "CORRECT"),  # a reasoning block is not the reply
    ("It is CORRECT even if it looks wrong at first.", "CORRECT"),  # capitals are the label
    ("correct", "CORRECT"),
    ("I cannot tell.", None), ("", None), ("correct or wrong, hard to say", None), ("{not json}", None),
])
def test_judge_label_reads_the_label_through_noise(reply, label):
    assert judge_label(reply) == label


@pytest.fixture
def store(tmp_path):
    with MemoryStore.open(f"sqlite:///{tmp_path / 'a.db'}", "hashing") as s:
        s.add_many(turn_items(_locomo_sample()))
        yield s


def _client(chat: ScriptedChat) -> ChatClient:
    return ChatClient.wrap(chat, retry=RetryPolicy(attempts=1))


def test_answers_are_asked_with_the_injected_memory_and_judged(store):
    answerer = ScriptedChat(script=["Biscuit", "Porto"], usage=(300, 5))
    judge = ScriptedChat(script=["Same name.\nLABEL: CORRECT", "I am not sure."], usage=None)
    report = measure(store, [_locomo_sample()], AnswerRun(_client(answerer), _client(judge)))
    prompt = answerer.calls[0]
    assert [m.type for m in prompt] == ["system", "system", "human"]  # memory right before the question
    assert prompt[-1].content == "What is the name of Ann's puppy?"
    assert prompt[1].content.startswith("## Relevant Memory") and "Ann: I adopted a puppy named Biscuit" in prompt[1].content
    assert "2023-05-08" in prompt[1].content  # dated as the adapters date it
    asked_judge = judge.calls[0][-1].content
    assert "Reference answer: Biscuit" in asked_judge and "Assistant's answer: Biscuit" in asked_judge
    assert report["questions"] == 2 and report["correct"] == 1  # category 5 is not asked
    assert report["j"] == 0.5 and report["f1"] == 0.5
    assert report["judge_unparsed"] == 1  # an unreadable verdict is WRONG, counted apart
    assert report["rows"][1]["label"] == "WRONG" and report["rows"][1]["unparsed"] is True
    assert report["per_category"]["4"]["j"] == 0.5 and report["evidence_in_prompt"] == 1.0
    assert report["calls"]["answer"] == {"calls": 2, "failed": 0, "input_tokens": 600, "output_tokens": 10,
                                         "estimated": False}
    assert report["calls"]["judge"]["calls"] == 2 and report["calls"]["judge"]["estimated"] is True
    text = locomo_answer.format_report(report)
    assert "cat 4 single-hop" in text and "0.500" in text and "judge calls 2" in text


def test_a_failed_call_is_reported_on_its_question_and_counted(store):
    answerer = ScriptedChat(script=[RuntimeError("model exploded"), "Lisbon"])
    judge = ScriptedChat(script=[ValueError("judge exploded")])
    report = measure(store, [_locomo_sample()], AnswerRun(_client(answerer), _client(judge)))
    assert report["answer_errors"] == 1 and report["judge_errors"] == 1 and report["j"] == 0.0
    assert report["rows"][0]["answer"] is None and report["rows"][1]["answer"] == "Lisbon"
    assert report["rows"][1]["f1"] == 1.0  # the answer is kept and F1-scored; only its judgement failed
    messages = [e["message"] for e in report["errors"]]
    assert "model exploded" in messages[0] and "judge exploded" in messages[1]
    assert report["calls"]["answer"]["failed"] == 1 and report["calls"]["judge"]["failed"] == 1
    assert "model exploded" in locomo_answer.format_report(report)


def test_questions_failing_in_a_row_stop_the_run(store, monkeypatch):
    monkeypatch.setattr(locomo_answer, "FAILURES_IN_A_ROW", 2)
    answerer = ScriptedChat(script=[ConnectionRefusedError("no server"), ConnectionRefusedError("no server")])
    with pytest.raises(ExtractionError, match="2 questions in a row failed.*no server"):
        measure(store, [_locomo_sample()], AnswerRun(_client(answerer), _client(ScriptedChat())))


def test_the_limit_and_k_shape_the_run(store):
    answerer = ScriptedChat(script=["Biscuit"])
    judge = ScriptedChat(script=["LABEL: CORRECT"])
    report = measure(store, [_locomo_sample()], AnswerRun(_client(answerer), _client(judge), k=1, limit=1))
    assert report["questions"] == 1 and report["j"] == 1.0 and report["k"] == 1
    assert report["rows"][0]["memories"] == 1 and answerer.calls[0][1].content.count("\n- [") == 1


def _data(tmp_path) -> str:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([_locomo_sample()]), encoding="utf-8")
    return str(path)


def test_the_command_resolves_both_specs_and_writes_the_report(tmp_path, monkeypatch, capsys):
    models = {"fake:answers": ScriptedChat(script=["Biscuit", "Lisbon"]),
              "fake:judge": ScriptedChat(script=["LABEL: CORRECT", "LABEL: CORRECT"])}
    seen = []

    def resolve(spec, settings):
        seen.append(spec)
        return ChatClient.wrap(models[spec]) if spec in models else None

    monkeypatch.setattr(locomo_answer, "resolve_chat_model", resolve)
    out = tmp_path / "out.json"
    assert main(["bench", "locomo", "--data", _data(tmp_path), "--embeddings", "hashing", "--answer-model",
                 "fake:answers", "--judge-model", "fake:judge", "--answer-k", "3", "--json", str(out)]) == 0
    assert seen == ["fake:answers", "fake:judge"]
    printed = capsys.readouterr().out
    assert "LoCoMo retrieval" in printed and "LoCoMo answers: 2 questions" in printed
    answer = json.loads(out.read_text())["answer"]
    assert answer["j"] == 1.0 and answer["f1"] == 1.0 and answer["k"] == 3
    assert len(models["fake:judge"].calls) == 2 and "Reference answer: Lisbon" in models["fake:judge"].prompt()
    # a spec that names no model fails before any work, and so does a judge without answers
    assert main(["bench", "locomo", "--data", _data(tmp_path), "--answer-model", "none"]) == 2
    assert "no chat model" in capsys.readouterr().err
    assert main(["bench", "locomo", "--data", _data(tmp_path), "--judge-model", "fake:judge"]) == 2
    assert "add --answer-model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "locomo", "--data", _data(tmp_path), "--answer-limit", "0"])


def test_an_openai_url_spec_talks_to_that_server(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("NAVI_MEMORY_CHAT_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = FakeOpenAI()
    try:
        server.replies = ["Biscuit", '{"label": "CORRECT"}']
        assert main(["bench", "locomo", "--data", _data(tmp_path), "--embeddings", "hashing", "--answer-model",
                     f"openai:{server.url}#qwen2.5-7b", "--answer-limit", "1"]) == 0
        chats = [r for r in server.requests if r["path"] == "/v1/chat/completions"]
        assert [c["body"]["model"] for c in chats] == ["qwen2.5-7b", "qwen2.5-7b"]
        assert chats[0]["body"]["messages"][-1] == {"role": "user", "content": "What is the name of Ann's puppy?"}
        assert "answer calls 1 (0 failed), tokens in 100 out 20" in capsys.readouterr().out
        assert chat_client(f"openai:{server.url}", Settings(url="x")).name == "openai:default"
    finally:
        server.close()


def test_a_chat_model_object_is_wrapped_and_a_bad_spec_refused():
    assert chat_client(ScriptedChat(), Settings(url="x")).name == "ScriptedChat:scripted"
    with pytest.raises(ConfigurationError):
        chat_client("none", Settings(url="x"))


def test_evidence_counts_only_when_its_turn_reached_the_block():
    from types import SimpleNamespace

    from navi_memory.bench.locomo_answer import evidence_in_prompt
    from navi_memory.integrations._context import MemoryContext

    turns = [SimpleNamespace(metadata={"dia_id": "D1:1"}, content="Ann: a <puppy> named Biscuit, adopted last week"),
             SimpleNamespace(metadata={"dia_id": "D1:2"}, content="Bob: pottery")]
    shown = MemoryContext(volatile="- [x] Ann: a &lt;puppy&gt; named Biscuit, adopted …", results=turns)  # shortened
    assert evidence_in_prompt(shown, ["D1:1"]) and not evidence_in_prompt(shown, ["D1:2"])  # searched, over budget
    assert not evidence_in_prompt(MemoryContext(results=turns), ["D1:1"])  # no block at all


def test_memory_off_or_failing_stops_the_bench_rather_than_answering_without_it(store, monkeypatch):
    from navi_memory.errors import NaviMemoryError, StorageError

    run = AnswerRun(_client(ScriptedChat()), _client(ScriptedChat()))
    monkeypatch.setenv("NAVI_MEMORY_INJECTION", "0")
    with pytest.raises(ConfigurationError, match="injection is turned off"):
        measure(store, [_locomo_sample()], run)
    monkeypatch.delenv("NAVI_MEMORY_INJECTION")

    def broken(*args, **kwargs):
        raise StorageError("disk on fire")

    monkeypatch.setattr(store, "search", broken)
    with pytest.raises(NaviMemoryError, match="memory unavailable for conv-t"):
        measure(store, [_locomo_sample()], run)


def test_a_limited_run_spreads_its_questions_over_the_data():
    assert locomo_answer.spread(list(range(10)), 3) == [0, 3, 6]
    assert locomo_answer.spread(list(range(10)), 1) == [0]
    assert locomo_answer.spread(list(range(4)), 9) == [0, 1, 2, 3]
    assert locomo_answer.spread(list(range(4)), None) == [0, 1, 2, 3]
    picked = locomo_answer.spread([(c, q) for c in "abcd" for q in range(150)], 8)  # four conversations
    assert {c for c, _ in picked} == set("abcd") and len(set(picked)) == 8
