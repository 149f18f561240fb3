"""The relevance floor on LoCoMo (``navi-memory bench locomo --floor``): what a floor costs and what it saves.

For each candidate floor (``search(min_score=...)``) and each conversation:

* **cut**: of the evidence turns ranked in the top 10 without a floor, the fraction the floor
  removes from the top 10 (what injecting with that floor would lose);
* **emptied**: of the ``OFF_TOPIC`` questions (general questions an assistant gets that no
  conversation memory answers), the fraction for which the search returns nothing at all.

Each floor is measured for each lexical credit in ``credits`` (how much similarity a full-text
match of a content word is worth, ``retrieval.search.LEXICAL_CREDIT``, set for the run: 0 judges
by cosine alone, 1 lets any such match through). The default is chosen by
leave-one-conversation-out: on three conversations, the (credit, floor) emptying the most
off-topic questions with a cut of at most the budget; reported on the fourth. Budgets: none
(the floor must not cost recall: the store's default) and 1%.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ..retrieval import search as ranking
from ..store import MemoryStore
from .locomo_data import questions

TOP = 10
FLOORS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.7)  # 0.7: a cosine distance cutoff of 0.3
CUT_BUDGETS = (0.0, 0.01)  # share of the top-10 evidence turns a floor may lose
OFF_TOPIC = (
    "What is the capital of France?",
    "How many moons does Jupiter have?",
    "What is the boiling point of water at sea level?",
    "Who wrote Pride and Prejudice?",
    "How do I convert Celsius to Fahrenheit?",
    "What is the square root of 144?",
    "Translate 'good morning' into Japanese.",
    "In which year did the Berlin Wall fall?",
    "How does a transistor work?",
    "What is the speed of light in a vacuum?",
    "What is the chemical formula of table salt?",
    "How do I reverse a linked list in Python?",
    "What is the tallest mountain in Africa?",
    "Explain the difference between TCP and UDP.",
    "What is the exchange rate between euros and yen?",
    "How many bones are in the human body?",
    "Who painted the Mona Lisa?",
    "What is photosynthesis?",
    "Which sorting algorithm suits nearly sorted data?",
    "What causes the seasons on Earth?",
)


@contextmanager
def lexical_credit(value: float) -> Iterator[None]:
    saved = ranking.LEXICAL_CREDIT
    ranking.LEXICAL_CREDIT = value
    try:
        yield
    finally:
        ranking.LEXICAL_CREDIT = saved


def measure(store: MemoryStore, samples: list[dict[str, Any]], floors: Sequence[float] = FLOORS,
            credits: Sequence[float] = (ranking.LEXICAL_CREDIT,)) -> dict[str, Any]:
    """Counts per credit, floor and conversation (evidence turns in the unfloored top 10 and how many
    the floor cuts; off-topic questions asked, emptied, results kept), their rates and the choice."""
    counts: dict[str, dict[str, dict[str, dict[str, int]]]] = {
        str(c): {str(f): {} for f in floors} for c in credits}
    for sample in samples:
        user = sample["sample_id"]

        def top(query: str, vector: Any, floor: float) -> list[str]:
            return [r.metadata.get("dia_id", "") for r in store.search(query, user_id=user, limit=TOP,
                                                                   min_score=floor, query_embedding=vector)]

        for by_floor in counts.values():
            for floor in floors:
                by_floor[str(floor)][user] = {"evidence": 0, "cut": 0, "off_topic": len(OFF_TOPIC), "emptied": 0,
                                              "kept": 0}
        asked = [(q["question"], _embed(store, q["question"]), set(q["evidence"])) for q in questions(sample)]
        found = [set(top(text, vector, 0.0)) & evidence for text, vector, evidence in asked]
        off_topic = [(text, _embed(store, text)) for text in OFF_TOPIC]
        for credit in credits:
            with lexical_credit(credit):
                for floor in floors:
                    row = counts[str(credit)][str(floor)][user]
                    for (text, vector, _), hits in zip(asked, found):
                        row["evidence"] += len(hits)
                        row["cut"] += len(hits - set(top(text, vector, floor)))
                    for text, vector in off_topic:
                        kept = top(text, vector, floor)
                        row["emptied"] += not kept
                        row["kept"] += len(kept)
    users = [s["sample_id"] for s in samples]
    return {"top": TOP, "credits": list(credits), "floors": list(floors), "off_topic": list(OFF_TOPIC),
            "counts": counts,
            "overall": {c: {f: rates(list(by_user.values())) for f, by_user in by_floor.items()}
                        for c, by_floor in counts.items()},
            "by_budget": [{"cut_budget": budget, "leave_one_out": leave_one_out(counts, users, budget),
                           "chosen_on_all": choose(counts, users, budget)} for budget in CUT_BUDGETS]}


def _embed(store: MemoryStore, text: str) -> Any:
    return None if store.embedder is None else store.embedder.embed_query(text)


def rates(rows: list[dict[str, int]]) -> dict[str, float]:
    total = {key: sum(r[key] for r in rows) for key in ("evidence", "cut", "off_topic", "emptied", "kept")}
    return {"cut": round(total["cut"] / max(1, total["evidence"]), 4),
            "emptied": round(total["emptied"] / max(1, total["off_topic"]), 4),
            "kept_per_off_topic": round(total["kept"] / max(1, total["off_topic"]), 2),
            "evidence": total["evidence"]}


def choose(counts: dict[str, dict[str, dict[str, dict[str, int]]]], users: Sequence[str],
           budget: float) -> dict[str, Any]:
    """On ``users``: the (credit, floor) emptying the most off-topic questions within the cut budget
    (ties: the smaller cut, then the higher floor, then the smaller credit); no floor when none fits."""
    best: tuple[float, ...] = (-1.0, 0.0, 0.0, 0.0)
    choice: dict[str, Any] = {"credit": None, "floor": 0.0}
    if not users:
        return choice
    for credit, by_floor in counts.items():
        for floor, by_user in by_floor.items():
            r = rates([by_user[u] for u in users])
            key = (r["emptied"], -r["cut"], float(floor), -float(credit))
            if r["cut"] <= budget and key > best:
                best, choice = key, {"credit": float(credit), "floor": float(floor)}
    return choice


def leave_one_out(counts: dict[str, dict[str, dict[str, dict[str, int]]]], users: Sequence[str],
                  budget: float) -> list[dict[str, Any]]:
    out = []
    for held_out in users:
        choice = choose(counts, [u for u in users if u != held_out], budget)
        row: dict[str, Any] = {"held_out": held_out, **choice}
        if choice["credit"] is not None:
            row.update(rates([counts[str(choice["credit"])][str(choice["floor"])][held_out]]))
        out.append(row)
    return out


def format_report(report: dict[str, Any]) -> str:
    users = list(next(iter(next(iter(report["counts"].values())).values())))
    lines = [f"Relevance floor: cut = top-{report['top']} evidence turns removed, emptied = off-topic questions"
             f" ({len(report['off_topic'])} per conversation) answered with nothing; cut/emptied per conversation"]
    for credit, by_floor in report["counts"].items():
        lines.append(f"lexical credit {credit}")
        lines.append(f"  {'floor':>5} {'cut':>6} {'emptied':>7} {'kept':>5}  " + " ".join(f"{u:>13}" for u in users))
        for floor, by_user in by_floor.items():
            o = report["overall"][credit][floor]
            cells = " ".join(f"{rates([by_user[u]])['cut']:>6.3f}/{rates([by_user[u]])['emptied']:<6.3f}"
                             for u in users)
            lines.append(f"  {floor:>5} {o['cut']:>6.3f} {o['emptied']:>7.3f} {o['kept_per_off_topic']:>5}  {cells}")
    for part in report["by_budget"]:
        lines.append(f"leave-one-conversation-out, most emptied with cut <= {part['cut_budget']:.0%} on the others:")
        for row in part["leave_one_out"]:
            lines.append(f"  held out {row['held_out']}: credit {row['credit']}, floor {row['floor']}: "
                         f"cut {row.get('cut', 0.0):.3f}, emptied {row.get('emptied', 0.0):.3f}")
        chosen = part["chosen_on_all"]
        lines.append(f"  chosen on all conversations: credit {chosen['credit']}, floor {chosen['floor']}")
    return "\n".join(lines)
