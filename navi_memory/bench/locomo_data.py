"""LoCoMo as a retrieval task: a conversation's turns as items, its questions, and the scoring
of ranked answers (recall@k, hit@k, NDCG@10) overall and per category. Shared by ``bench.locomo``
(the product's search), ``bench.locomo_peers`` and ``bench.locomo_floor``."""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..progress import Progress

KS = (1, 5, 10, 20)
CATEGORIES = (1, 2, 3, 4)
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)
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


def questions(sample: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]


def score(ranked: Sequence[str], evidence: Iterable[str]) -> dict[str, float]:
    """recall@k, hit@k and NDCG@10 of one ranked list of dia_ids."""
    gold = set(evidence)
    out: dict[str, float] = {}
    for k in KS:
        found = len(gold & set(ranked[:k]))
        out[f"recall@{k}"] = found / len(gold)
        out[f"hit@{k}"] = 1.0 if found else 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["ndcg@10"] = dcg / ideal
    return out


def summarise(rows: list[dict[str, float]]) -> dict[str, Any]:
    mean = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]} if rows else {}
    return {"questions": len(rows),
            "recall": {str(k): round(mean.get(f"recall@{k}", 0.0), 4) for k in KS},
            "hit": {str(k): round(mean.get(f"hit@{k}", 0.0), 4) for k in KS},
            "ndcg10": round(mean.get("ndcg@10", 0.0), 4)}


def ask(samples: list[dict[str, Any]], search: Callable[[str, str], list[str]],
        label: str = "questions") -> dict[str, Any]:
    """Ask every question with ``search(user, question)`` (ranked dia_ids, best first): metrics and latency."""
    asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
    progress = Progress(label, len(asked))
    rows, by_category, latencies = [], defaultdict(list), []
    for index, (user, q) in enumerate(asked):
        start = time.perf_counter()
        ranked = search(user, q["question"])
        latencies.append((time.perf_counter() - start) * 1000)
        row = score(ranked, q["evidence"])
        rows.append(row)
        by_category[q["category"]].append(row)
        progress(index + 1)
    progress.close()
    report = summarise(rows)
    report["per_category"] = {str(c): summarise(by_category[c]) for c in CATEGORIES if by_category[c]}
    report["latency_ms"] = {"p50": round(float(np.percentile(latencies, 50)), 2),
                            "p95": round(float(np.percentile(latencies, 95)), 2)}
    return report
