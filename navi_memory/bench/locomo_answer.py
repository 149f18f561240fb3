"""Answer accuracy on LoCoMo (``navi-memory bench locomo --answer-model SPEC``): the answer, not only the evidence.

For each category 1–4 question with evidence (the questions the retrieval bench asks), the memory a
turn's prompt would carry is built the way the framework adapters build it
(``MemoryContextBuilder``: the product's search with its relevance floor, ``k`` results, the
``## Relevant Memory`` block within the injection token budget), placed as the adapters place it
(stable part after the system message, volatile part right before the user message), and a chat
model answers the question. Each answer is scored twice against the gold answer:

- **J**, the LLM-judge accuracy of the mem0 paper (Chhikara et al., 2025): a judge model labels
  the answer CORRECT or WRONG, generous on wording, length and format, strict on the facts. A
  judge reply with no readable label counts as WRONG and is counted apart (``judge_unparsed``).
- **F1**, the token overlap of SQuAD: lower case, punctuation and the articles a/an/the removed.

A call that fails (after the chat client's own retries) is reported on its question and counted
(``answer_errors`` / ``judge_errors``; such a question scores WRONG and F1 0); three questions
failing in a row stop the run with the error (the model is down or misconfigured). Models come
from a spec (``resolve_chat_model``: ``provider:model`` of LangChain, an Ollama name, or
``openai:URL[#MODEL]`` for any server speaking OpenAI's API) or, from Python, a chat model object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import string
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping, Sequence, TypeVar

from ..config import Settings
from ..errors import ConfigurationError, ExtractionError, NaviMemoryError
from ..integrations._caller import StoreCaller
from ..integrations._context import DEFAULT_K, MemoryContext, MemoryContextBuilder
from ..pipeline.llm import ChatClient, LLMReply, resolve_chat_model, strip_reasoning
from ..progress import Progress
from ..prompt import escape
from ..store import MemoryStore
from .locomo_data import CATEGORIES, questions

T = TypeVar("T")
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
FAILURES_IN_A_ROW = 3  # questions whose calls failed one after another: the run stops
OPENAI_DEFAULT_MODEL = "default"  # the model name sent to an openai:URL server when the spec names none

ANSWER_SYSTEM = (
    "You are an assistant with a long-term memory of the user's past conversations. The memory that "
    "may help with the user's message is given to you below, each entry dated by the day it was said. "
    "Answer the user's question from that memory in a short phrase, a few words at most, with no "
    "explanation. Give names, numbers, places and dates exactly; turn relative dates in the memory "
    "('last week', 'yesterday') into dates using the day the entry was said. If the memory does not "
    "settle the question, give your best guess from it.")

JUDGE_SYSTEM = (
    "You grade answers given by an assistant about a long conversation between two people. You see "
    "the question, the reference answer and the assistant's answer. The assistant's answer is "
    "CORRECT when it states the fact the reference states: a different wording, a longer or shorter "
    "answer, extra detail that does not contradict the reference, or another way of giving the same "
    "date, time period, number or name (for example '7 May 2023', 'May 7th, 2023' and 'the Sunday "
    "before 8 May 2023' name one day) are all CORRECT; when the reference lists several things, an "
    "answer naming some of them and nothing else is CORRECT. It is WRONG when it gives another fact, "
    "contradicts the reference, leaves out the fact the question asks for, or says it does not know. "
    "Write one short sentence of reasoning, then a last line that is exactly 'LABEL: CORRECT' or "
    "'LABEL: WRONG'.")

Label = Literal["CORRECT", "WRONG"]


# -- scoring --------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, punctuation removed, the articles a/an/the removed,
    whitespace folded."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD's token F1 of ``prediction`` against ``gold``, both normalised; 1.0 when both are empty
    after normalisation, 0.0 when only one is."""
    predicted, expected = normalise(prediction).split(), normalise(gold).split()
    if not predicted or not expected:
        return float(predicted == expected)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


_LABEL_LINE = re.compile(r"label\W{0,3}\s*(correct|incorrect|wrong)\b", re.I)
_LABEL_WORD = re.compile(r"\b(correct|incorrect|wrong)\b", re.I)


def judge_label(reply: str) -> Label | None:
    """The label of a judge's reply, or None when it has none that can be read. Read, in order: a
    ``LABEL: ...`` line (the last one), a JSON object's ``label``, the label words in capitals, then
    any label word if all of them agree. INCORRECT is WRONG; a reasoning model's ``<think>`` is
    ignored."""
    text = strip_reasoning(reply)
    lines = _LABEL_LINE.findall(text)
    if lines:
        return _as_label(lines[-1])
    parsed = _json_label(text)
    if parsed is not None:
        return parsed
    capitals = [w for w in _LABEL_WORD.findall(text) if w.isupper()]
    if capitals:
        return _as_label(capitals[-1])
    found = {_as_label(w) for w in _LABEL_WORD.findall(text)}
    return found.pop() if len(found) == 1 else None


def _as_label(word: str) -> Label:
    return "CORRECT" if word.lower() == "correct" else "WRONG"


def _json_label(text: str) -> Label | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except ValueError:
        return None
    label = value.get("label") if isinstance(value, dict) else None
    if isinstance(label, str) and label.strip().lower() in ("correct", "incorrect", "wrong"):
        return _as_label(label.strip())
    return None


# -- the models -----------------------------------------------------------------------------

def chat_client(spec: Any, settings: Settings | None = None) -> ChatClient:
    """The chat client of ``spec``: a LangChain chat model object, ``provider:model`` (LangChain's
    ``init_chat_model``), an Ollama model name (``ollama:llama3.1`` or ``llama3.1``), or
    ``openai:URL`` / ``openai:URL#MODEL`` for a server speaking OpenAI's API at URL (its key from
    ``NAVI_MEMORY_CHAT_API_KEY`` or ``OPENAI_API_KEY``; local servers take any). Connection settings
    (``OLLAMA_HOST``, timeouts, retries) come from ``settings``, by default the environment's."""
    settings = settings or Settings.from_env()
    if isinstance(spec, str):
        provider, _, rest = spec.strip().partition(":")
        if provider.lower() == "openai" and rest.lower().startswith(("http://", "https://")):
            url, _, model = rest.partition("#")
            key = settings.chat_api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
            settings = replace(settings, chat_url=url, chat_api_key=key)
            spec = f"openai:{model.strip() or OPENAI_DEFAULT_MODEL}"
    client = resolve_chat_model(spec, settings)
    if client is None:
        raise ConfigurationError(f"no chat model for {spec!r}: name one, e.g. ollama:llama3.1 or openai:gpt-4o-mini")
    return client


@dataclass
class CallTally:
    """Calls of one role (answer or judge) and their tokens (``estimated``: some counts are estimates,
    4 characters a token, where the provider reported none)."""

    calls: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False

    def book(self, reply: LLMReply) -> None:
        self.calls += 1
        self.input_tokens += reply.input_tokens
        self.output_tokens += reply.output_tokens
        self.estimated = self.estimated or reply.estimated

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "failed": self.failed, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "estimated": self.estimated}


@dataclass
class AnswerRun:
    """What one run asks with: the models, the memory's size, how many questions."""

    answerer: ChatClient
    judge: ChatClient
    k: int = DEFAULT_K
    max_tokens: int | None = None
    limit: int | None = None
    tallies: dict[str, CallTally] = field(default_factory=lambda: {"answer": CallTally(), "judge": CallTally()})

    def call(self, role: str, messages: list[tuple[str, str]]) -> LLMReply:
        tally = self.tallies[role]
        try:
            reply = (self.answerer if role == "answer" else self.judge).invoke(f"locomo {role}", messages)
        except ExtractionError:
            tally.calls += 1
            tally.failed += 1
            raise
        tally.book(reply)
        return reply


# -- the prompt and one question -----------------------------------------------------------

def answer_messages(question: str, context: MemoryContext) -> list[tuple[str, str]]:
    """The answerer's messages, the memory placed as ``integrations.langchain.inject_memory`` places
    it: the stable part right after the system message, the volatile part right before the question."""
    messages = [("system", ANSWER_SYSTEM)]
    if context.stable:
        messages.append(("system", context.stable))
    if context.volatile:
        messages.append(("system", context.volatile))
    return [*messages, ("human", question)]


def judge_messages(question: str, gold: str, answer: str) -> list[tuple[str, str]]:
    return [("system", JUDGE_SYSTEM),
            ("human", f"Question: {question}\nReference answer: {gold}\nAssistant's answer: {answer}")]


def gold_answer(question: Mapping[str, Any]) -> str:
    """The reference answer as text (LoCoMo gives some as numbers)."""
    answer = question.get("answer")
    return "" if answer is None else str(answer)


def evidence_in_prompt(context: MemoryContext, evidence: Sequence[str]) -> bool:
    """Whether a turn of the evidence made it into the injected block (searched and within the budget;
    its opening is enough: the best result alone may be shortened to fit)."""
    block = context.volatile or ""
    return any(r.metadata.get("dia_id") in evidence and escape(r.content, single_line=True)[:40] in block
               for r in context.results)


def ask_one(run: AnswerRun, builder: MemoryContextBuilder, user: str, q: Mapping[str, Any]) -> dict[str, Any]:
    """One question: the memory, the answer, the judge's label and F1 (a failed call: ``error``)."""
    context = builder.build(q["question"], False, user_id=user)
    if context is None:
        raise ConfigurationError("memory injection is turned off (NAVI_MEMORY_INJECTION / _DISABLED): nothing to measure")
    if not context.available:  # the builder keeps a conversation going without memory; a bench must not
        raise NaviMemoryError(f"memory unavailable for {user} (see the log): the answer bench stops")
    gold = gold_answer(q)
    row: dict[str, Any] = {"user": user, "question": q["question"], "category": q["category"], "gold": gold,
                           "answer": None, "label": "WRONG", "judge_reply": None, "f1": 0.0, "error": None,
                           "memories": len(context.results), "evidence_in_prompt": evidence_in_prompt(
                               context, q["evidence"])}
    try:
        answer = run.call("answer", answer_messages(q["question"], context)).text.strip()
    except ExtractionError as exc:
        row["error"] = {"call": "answer", "message": str(exc)}
        return row
    row["answer"], row["f1"] = answer, token_f1(answer, gold)
    try:
        reply = run.call("judge", judge_messages(q["question"], gold, answer)).text
    except ExtractionError as exc:
        row["error"] = {"call": "judge", "message": str(exc)}
        return row
    label = judge_label(reply)
    row["judge_reply"], row["label"], row["unparsed"] = reply, label or "WRONG", label is None
    return row


# -- a run ----------------------------------------------------------------------------------

def spread(items: list[T], count: int | None) -> list[T]:
    """``count`` of ``items`` evenly spaced, the first included, in their order (all for None): a
    quick run over the data's first questions would ask one conversation only."""
    if count is None or count >= len(items):
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def measure(store: MemoryStore, samples: list[dict[str, Any]], run: AnswerRun) -> dict[str, Any]:
    """Ask the questions of ``samples`` (already ingested in ``store``, one user per sample) with the
    memory the product injects; J, F1 and counts overall and per category, each question's row."""
    builder = MemoryContextBuilder(StoreCaller(store), k=run.k, max_tokens=run.max_tokens)
    asked = spread([(s["sample_id"], q) for s in samples for q in questions(s)], run.limit)
    progress = Progress("answers", len(asked), unit="questions")
    rows: list[dict[str, Any]] = []
    failing = 0
    for index, (user, q) in enumerate(asked):
        row = ask_one(run, builder, user, q)
        rows.append(row)
        failing = failing + 1 if row["error"] else 0
        if failing >= FAILURES_IN_A_ROW:
            progress.close()
            raise ExtractionError(f"the answer bench stopped: {failing} questions in a row failed; the last:"
                                  f" {row['error']['message']}")
        progress(index + 1)
    progress.close()
    report = summarise(rows)
    report["per_category"] = {str(c): summarise([r for r in rows if r["category"] == c])
                              for c in CATEGORIES if any(r["category"] == c for r in rows)}
    report.update({"answer_model": run.answerer.name, "judge_model": run.judge.name, "k": run.k,
                   "max_tokens": builder.max_tokens, "min_score": builder.min_similarity,
                   "calls": {role: tally.as_dict() for role, tally in run.tallies.items()},
                   "errors": [{"question": r["question"], **r["error"]} for r in rows if r["error"]],
                   "rows": rows})
    return report


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {"questions": n,
            "j": round(sum(r["label"] == "CORRECT" for r in rows) / n, 4) if n else 0.0,
            "f1": round(sum(r["f1"] for r in rows) / n, 4) if n else 0.0,
            "correct": sum(r["label"] == "CORRECT" for r in rows),
            "evidence_in_prompt": round(sum(bool(r["evidence_in_prompt"]) for r in rows) / n, 4) if n else 0.0,
            "answer_errors": sum(bool(r["error"]) and r["error"]["call"] == "answer" for r in rows),
            "judge_errors": sum(bool(r["error"]) and r["error"]["call"] == "judge" for r in rows),
            "judge_unparsed": sum(bool(r.get("unparsed")) for r in rows)}


def format_report(report: Mapping[str, Any]) -> str:
    lines = [f"LoCoMo answers: {report['questions']} questions, answer model {report['answer_model']},"
             f" judge {report['judge_model']}, memory k {report['k']} within {report['max_tokens']} tokens"
             f" (floor {report['min_score']:g})",
             f"{'':<22} {'J':>6} {'F1':>6} {'evidence':>9} {'n':>5} {'errors':>7} {'unparsed':>9}"]
    parts = [("overall", report), *((f"cat {c} {CATEGORY_NAMES[int(c)]}", p)
                                    for c, p in report["per_category"].items())]
    for name, part in parts:
        lines.append(f"{name:<22} {part['j']:>6.3f} {part['f1']:>6.3f} {part['evidence_in_prompt']:>9.3f}"
                     f" {part['questions']:>5} {part['answer_errors'] + part['judge_errors']:>7}"
                     f" {part['judge_unparsed']:>9}")
    for role, tally in report["calls"].items():
        approx = " (some estimated)" if tally["estimated"] else ""
        lines.append(f"{role} calls {tally['calls']} ({tally['failed']} failed), tokens in {tally['input_tokens']}"
                     f" out {tally['output_tokens']}{approx}")
    for error in report["errors"][:3]:
        lines.append(f"error ({error['call']}) on {error['question']!r}: {error['message']}")
    return "\n".join(lines)


# -- the command line -----------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--answer-model", default=None, metavar="SPEC",
                        help="also answer each question with this chat model and score the answers (J by an LLM"
                             " judge, token F1): provider:model (LangChain), an Ollama model (ollama:llama3.1),"
                             " or openai:URL[#MODEL] (a server speaking OpenAI's API)")
    parser.add_argument("--judge-model", default=None, metavar="SPEC",
                        help="the judge of --answer-model's answers (default: the answer model)")
    parser.add_argument("--answer-limit", type=_positive, default=None, metavar="N",
                        help="with --answer-model: N questions only, evenly spaced over the data (a quick run)")
    parser.add_argument("--answer-k", type=_positive, default=DEFAULT_K, metavar="K",
                        help="memories searched for each answer's prompt (default %(default)s, the adapters')")
    parser.add_argument("--answer-tokens", type=_positive, default=None, metavar="N",
                        help="token budget of the injected memory (default: the store's, NAVI_MEMORY_INJECTION_TOKENS)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("a whole number of at least 1")
    return value


def from_arguments(args: argparse.Namespace) -> AnswerRun | None:
    """The run ``args`` ask for (None without ``--answer-model``); the models resolved before any work."""
    spec = getattr(args, "answer_model", None)
    if not spec:
        if getattr(args, "judge_model", None):
            raise ConfigurationError("--judge-model judges the answers of --answer-model: add --answer-model")
        return None
    answerer = chat_client(spec)
    judge = chat_client(args.judge_model) if getattr(args, "judge_model", None) else answerer
    return AnswerRun(answerer, judge, k=getattr(args, "answer_k", DEFAULT_K),
                     max_tokens=getattr(args, "answer_tokens", None), limit=getattr(args, "answer_limit", None))
