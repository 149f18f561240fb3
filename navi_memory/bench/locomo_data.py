"""LoCoMo as a retrieval task: a conversation's turns as items, its questions, and the scoring
of ranked answers (recall@k, hit@k, NDCG@10; session hit@k and session recall@k; evidence within a
token budget) overall and per category. Shared by ``bench.locomo`` (the product's search),
``bench.locomo_peers`` and ``bench.locomo_floor``.

The two measures peers publish, defined here once for every system:

* **session hit@k** (engram-search's "session R@k"): 1 when any of the top k retrieved turns comes
  from a session that holds one of the question's evidence turns; **session recall@k**: the share of
  the evidence sessions that the top k turns reach.
* **budget recall**: the retrieved turns are taken in rank order, each costing the tokens of its text
  (``prompt.approximate_tokens``, LangChain's ~4 characters a token), while the running total stays
  within the budget (1,000 by default; the first turn that would overflow ends the list); the share
  of the evidence turns among those kept.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..progress import Progress

KS = (1, 5, 10, 20)
SESSION_KS = (5, 10)
BUDGET = 1000  # tokens of retrieved text, the context a reader gets
TOKENS_PER_TURN_FLOOR = 20  # about half a LoCoMo turn: how deep to search so that a budget can fill
CATEGORIES = (1, 2, 3, 4)
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)
_SESSION = re.compile(r"D(\d+):")
_MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"], start=1)}


def session_date(text: str | None) -> datetime | None:
    """``'1:56 pm on 8 May, 2023'`` -> aware UTC datetime (None when it does not parse)."""
    match = _DATE.search(text or "")
    if not match:
        return None
    hour, minute, half, day, month, year = match.groups()
    month_no = _MONTHS.get(month.lower())
    if month_no is None:
        return None
    hour_24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), month_no, int(day), hour_24, int(minute), tzinfo=timezone.utc)


def turn_items(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of one conversation, in order."""
    conv, items = sample["conversation"], []
    sessions = sorted((int(k.split("_")[1]), k) for k in conv if re.fullmatch(r"session_\d+", k))
    for number, key in sessions:
        when = session_date(conv.get(f"{key}_date_time"))
        previous = None
        for turn in conv[key]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            items.append({"user_id": sample["sample_id"], "content": text, "type": "other", "theme": "conversation",
                          "source": "locomo", "observed_at": when, "person": turn["speaker"], "context": previous,
                          "source_ref": {"session_id": f"{sample['sample_id']}:{number}", "dia_id": turn["dia_id"]},
                          "metadata": {"dia_id": turn["dia_id"], "speaker": turn["speaker"], "session": number}})
            previous = text
    return items


def store_turns(store: Any, samples: Sequence[dict[str, Any]], done: Callable[[int], None] | None = None) -> None:
    """Each conversation's turns into ``store`` (a ``MemoryStore``), its user's earlier memory forgotten
    first, 256 turns a call; ``done(n)`` after each call with the turns stored so far."""
    stored = 0
    for sample in samples:
        items = turn_items(sample)
        store.forget(user_id=items[0]["user_id"])
        for start in range(0, len(items), 256):
            store.add_many(items[start:start + 256])
            stored += len(items[start:start + 256])
            if done is not None:
                done(stored)


def questions(sample: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]


def search_depth(budget: int = BUDGET) -> int:
    """How many turns to retrieve: the deepest k, or enough for ``budget`` tokens of short turns."""
    return max(max(KS), math.ceil(budget / TOKENS_PER_TURN_FLOOR))


def sessions_of(dia_id: str) -> set[int]:
    """The sessions a LoCoMo dia_id names: ``"D3:7"`` -> {3}. A few evidence entries of the
    dataset are malformed (``"D8:6; D9:17"`` -> {8, 9}; ``"D"`` -> none)."""
    return {int(n) for n in _SESSION.findall(dia_id)}


def session_score(ranked: Sequence[str], evidence: Iterable[str], ks: Sequence[int] = SESSION_KS) -> dict[str, float]:
    """Session hit@k (any of the top k from an evidence session) and session recall@k (the share of
    the evidence sessions the top k reach). No session in the evidence: 0, as a miss."""
    gold = set().union(*(sessions_of(e) for e in evidence))
    out: dict[str, float] = {}
    for k in ks:
        reached = gold & set().union(*(sessions_of(d) for d in ranked[:k]))
        out[f"session_hit@{k}"] = 1.0 if reached else 0.0
        out[f"session_recall@{k}"] = len(reached) / len(gold) if gold else 0.0
    return out


def budget_score(ranked: Sequence[str], evidence: Iterable[str], tokens: Mapping[str, int],
                 budget: int = BUDGET) -> dict[str, float]:
    """The share of the evidence turns among the ranked turns kept, in order, while their tokens
    (``tokens[dia_id]``; a retrieved id that is no turn, e.g. a distractor, costs the mean turn)
    add up to at most ``budget``; also how many turns were kept and whether the list ran out
    before the budget stopped it (1.0: the search gave too few turns to fill it)."""
    gold, kept, used = set(evidence), [], 0
    unknown = math.ceil(sum(tokens.values()) / max(1, len(tokens)))
    for dia_id in ranked:
        cost = tokens.get(dia_id, unknown)
        if used + cost > budget:
            break
        kept.append(dia_id)
        used += cost
    return {"budget_recall": len(gold & set(kept)) / len(gold), "budget_turns": float(len(kept)),
            "budget_short": 1.0 if len(kept) == len(ranked) else 0.0}


def score(ranked: Sequence[str], evidence: Iterable[str], tokens: Mapping[str, int] | None = None,
          budget: int = BUDGET) -> dict[str, float]:
    """recall@k, hit@k and NDCG@10 of one ranked list of dia_ids; with ``tokens`` (a dia_id's
    tokens) also the session measures and the budget's (``session_score``, ``budget_score``)."""
    gold = set(evidence)
    out: dict[str, float] = {}
    for k in KS:
        found = len(gold & set(ranked[:k]))
        out[f"recall@{k}"] = found / len(gold)
        out[f"hit@{k}"] = 1.0 if found else 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["ndcg@10"] = dcg / ideal
    if tokens is not None:
        out.update(session_score(ranked, gold))
        out.update(budget_score(ranked, gold, tokens, budget))
    return out


def summarise(rows: list[dict[str, float]]) -> dict[str, Any]:
    mean = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]} if rows else {}
    return {"questions": len(rows),
            "recall": {str(k): round(mean.get(f"recall@{k}", 0.0), 4) for k in KS},
            "hit": {str(k): round(mean.get(f"hit@{k}", 0.0), 4) for k in KS},
            "ndcg10": round(mean.get("ndcg@10", 0.0), 4),
            **({"session_hit": {str(k): round(mean[f"session_hit@{k}"], 4) for k in SESSION_KS},
                "session_recall": {str(k): round(mean[f"session_recall@{k}"], 4) for k in SESSION_KS},
                "budget": {"recall": round(mean["budget_recall"], 4), "turns": round(mean["budget_turns"], 2),
                           "short": round(mean["budget_short"], 4)}}
               if "budget_recall" in mean else {})}


def turn_tokens(samples: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Each conversation's turns' tokens: ``{sample_id: {dia_id: tokens of the turn's text}}``, the
    text every system retrieves (``turn_items``' content), counted by ``prompt.approximate_tokens``."""
    from ..prompt import approximate_tokens

    return {s["sample_id"]: {i["metadata"]["dia_id"]: approximate_tokens(i["content"]) for i in turn_items(s)}
            for s in samples}


def ask(samples: list[dict[str, Any]], search: Callable[[str, str], list[str]],
        label: str = "questions", budget: int = BUDGET) -> dict[str, Any]:
    """Ask every question with ``search(user, question)`` (ranked dia_ids, best first, at least
    ``search_depth(budget)`` of them where the conversation has them): metrics and latency."""
    asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
    tokens = turn_tokens(samples)
    progress = Progress(label, len(asked))
    rows, by_category, latencies = [], defaultdict(list), []
    for index, (user, q) in enumerate(asked):
        start = time.perf_counter()
        ranked = search(user, q["question"])
        latencies.append((time.perf_counter() - start) * 1000)
        row = score(ranked, q["evidence"], tokens[user], budget)
        rows.append(row)
        by_category[q["category"]].append(row)
        progress(index + 1)
    progress.close()
    report = summarise(rows)
    report["per_category"] = {str(c): summarise(by_category[c]) for c in CATEGORIES if by_category[c]}
    report["budget_tokens"] = budget
    report["latency_ms"] = {"p50": round(float(np.percentile(latencies, 50)), 2),
                            "p95": round(float(np.percentile(latencies, 95)), 2)}
    return report
