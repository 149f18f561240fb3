"""Promotion: notes that keep coming back become a fact, and the promoted facts as a MEMORY.md. Pure.

The job reads a user's items with vectors and looks for clusters: items whose cosine distance to a
centre item is below ``MAX_DISTANCE`` (0.15, seed 004), at least ``MIN_OCCURRENCES`` (3) of them.
Centres are taken densest first (ties: oldest), and an item belongs to one cluster at most, so
the result does not depend on the order rows come back in. A cluster whose items were all promoted
before is skipped, which makes a re-run add nothing.

Each new cluster becomes one fact (category from the centre's theme or type, key from its title
or first words, value = the centre's text); the store upserts it and records its items in the
``promotions`` table. Promoted facts are the small always-in-prompt set (at most ~50, the stable
half of a prompt); ``render_memory_markdown`` writes the first 20 as a MEMORY.md file.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .models import FACT_CATEGORIES, _Record
from .prompt import escape

MAX_DISTANCE = 0.15
MIN_OCCURRENCES = 3
MAX_ITEMS = 5000  # newest items read per user and run
PROMPT_FACTS = 50  # the always-in-prompt set
MARKDOWN_ENTRIES = 20
KEY_WORDS = 6
_BLOCK = 512
_STOP = {"a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "is", "are", "was", "were",
         "be", "been", "it", "that", "this", "user", "users", "i", "my", "me", "we", "our", "they", "their", "he",
         "she", "his", "her", "has", "have", "had", "likes", "like", "s"}
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass
class Cluster:
    centre: dict[str, Any]
    members: list[dict[str, Any]]

    @property
    def fact_id(self) -> int | None:
        """The fact an earlier run made from some of these items (the most common), if any."""
        ids = Counter(m["fact_id"] for m in self.members if m.get("fact_id") is not None)
        return ids.most_common(1)[0][0] if ids else None

    @property
    def retired(self) -> bool:
        """Some items were promoted into a fact that has since been deleted: it stays deleted."""
        return any(m["promoted"] and m.get("fact_id") is None for m in self.members)

    @property
    def new_ids(self) -> list[int]:
        return [m["id"] for m in self.members if not m["promoted"]]


@dataclass
class PromotionReport(_Record):
    users: int = 0
    candidates: int = 0
    clusters: int = 0
    facts_added: int = 0
    facts_updated: int = 0
    items_promoted: int = 0


def find_clusters(rows: Sequence[dict[str, Any]], max_distance: float = MAX_DISTANCE,
                  min_size: int = MIN_OCCURRENCES) -> list[Cluster]:
    """Clusters with at least one item not yet promoted; rows need id, vector, promoted, created_at."""
    out: list[Cluster] = []
    by_size: dict[int, list[dict[str, Any]]] = {}
    for row in rows:  # vectors of another size (another model's leftovers) never mix
        by_size.setdefault(len(row["vector"]), []).append(row)
    for group in by_size.values():
        out.extend(_clusters(group, max_distance, min_size))
    return out


def _clusters(rows: list[dict[str, Any]], max_distance: float, min_size: int) -> list[Cluster]:
    matrix = np.asarray([r["vector"] for r in rows], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    near: list[np.ndarray] = []
    for start in range(0, len(rows), _BLOCK):
        sims = matrix[start:start + _BLOCK] @ matrix.T
        near.extend(np.flatnonzero(1.0 - s < max_distance) for s in sims)
    order = sorted(range(len(rows)), key=lambda i: (-len(near[i]), rows[i]["created_at"], rows[i]["id"]))
    taken: set[int] = set()
    out = []
    for i in order:
        if i in taken or len(near[i]) < min_size:
            continue
        members = [int(j) for j in near[i] if int(j) not in taken]
        if len(members) < min_size or i not in members:
            continue
        taken.update(members)
        if all(rows[j]["promoted"] for j in members):
            continue
        out.append(Cluster(rows[i], sorted((rows[j] for j in members), key=lambda r: r["id"])))
    return out


def fact_fields(cluster: Cluster) -> dict[str, Any]:
    """category, key, value, person and source_context of the fact a cluster becomes."""
    centre = cluster.centre
    theme = centre.get("theme") or ""
    category = theme if theme in FACT_CATEGORIES else "preferences" if centre.get("type") == "preference" \
        else "other"
    persons = {m.get("person") for m in cluster.members}
    ids = ", ".join(str(m["id"]) for m in cluster.members)
    return {"category": category, "key": fact_key(centre.get("title"), centre["content"]),
            "value": centre["content"], "person": persons.pop() if len(persons) == 1 else None,
            "source_context": f"promoted from {len(cluster.members)} similar items ({ids})"}


def fact_key(title: str | None, content: str) -> str:
    """A snake_case key: the title's words, else the first significant words of the content."""
    words = [w.lower() for w in _WORDS.findall(title or "")]
    if not words:
        words = [w for w in (w.lower() for w in _WORDS.findall(content)) if w not in _STOP] \
            or [w.lower() for w in _WORDS.findall(content)]
    return "_".join(words[:KEY_WORDS])[:80].strip("_") or "note"


def confidence(size: int) -> int:
    """More occurrences, more confidence: 3 -> 75, 4 -> 80, ... at most 95."""
    return min(95, 60 + 5 * size)


def render_memory_markdown(facts: Sequence[Any], *, user_id: str | None = None,
                           limit: int = MARKDOWN_ENTRIES) -> str:
    """The promoted facts as a small MEMORY.md (at most ``limit`` entries), grouped by category,
    for assistants that read memory from a file. ``facts``: ``Fact`` objects or fact mappings."""
    lines = ["# MEMORY.md", ""]
    if user_id is not None:
        shown = _one_line(user_id).replace("<", "&lt;").replace(">", "&gt;")  # a user id cannot end the comment
        lines += [f"<!-- generated by navi-memory from the promoted facts of user {shown} -->", ""]
    chosen = list(facts)[:limit]
    if not chosen:
        lines.append("_No promoted facts yet._")
    for category in FACT_CATEGORIES:
        group = [f for f in chosen if _get(f, "category") == category]
        if not group:
            continue
        lines += [f"## {category.capitalize()}", ""]
        for fact in group:
            about = f" (about {_one_line(_get(fact, 'person'))})" if _get(fact, "person") else ""
            lines.append(f"- **{_one_line(_get(fact, 'key')).replace('_', ' ')}**: {_one_line(_get(fact, 'value'))}"
                         f"{about}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


FACTS_HEADING = "## Known facts about the user"


def prompt_facts_block(facts: Sequence[Any], limit: int = PROMPT_FACTS) -> str | None:
    """The promoted facts for the stable half of a prompt (escaped, one line each), or None."""
    lines = []
    for fact in list(facts)[:limit]:
        about = f" (about {escape(str(_get(fact, 'person')), True)})" if _get(fact, "person") else ""
        lines.append(f"- {escape(str(_get(fact, 'key')).replace('_', ' '), True)}: "
                     f"{escape(str(_get(fact, 'value')), True)}{about}")
    if not lines:
        return None
    return f'{FACTS_HEADING}\n\n<memory kind="facts">\n' + "\n".join(lines) + "\n</memory>"


def _get(fact: Any, name: str) -> Any:
    return fact[name] if isinstance(fact, dict) else getattr(fact, name)


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())
