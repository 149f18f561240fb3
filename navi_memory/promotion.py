"""Promotion: notes that keep coming back become a fact, and the promoted facts as a MEMORY.md. Pure.

The job reads a user's items with vectors and looks for clusters: items whose cosine distance to a
centre item is below ``MAX_DISTANCE`` (0.15), at least ``MIN_OCCURRENCES`` (3) of them.
Centres are taken densest first (ties: oldest), and an item belongs to one cluster at most, so
the result does not depend on the order rows come back in. A cluster whose items were all promoted
before is skipped, which makes a re-run add nothing.

Without an embedding model, ``find_lexical_clusters`` does the same with shared words: two items
are near when half their content words (stems, ``retrieval.words``) are shared (Jaccard >= 0.5).

Each new cluster becomes one fact (category from the centre's theme or type, key from its title
or first words, value = the centre's text); the store upserts it and records its items in the
``promotions`` table. Promoted facts are the small always-in-prompt set (at most ~50, the stable
half of a prompt); ``render_memory_markdown`` writes a user's facts (promoted ones marked) and
pinned notes as a MEMORY.md file.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .retrieval.words import content_words
from .models import FACT_CATEGORIES, _Record
from .prompt import escape, escape_tags, renderable

MAX_DISTANCE = 0.15
LEXICAL_OVERLAP = 0.5  # without embeddings: Jaccard similarity of content words
LEXICAL_MIN_WORDS = 2
LEXICAL_MAX_WORDS = 40
MIN_OCCURRENCES = 3
MAX_ITEMS = 5000  # newest items read per user and run
PROMPT_FACTS = 50  # the always-in-prompt set
MARKDOWN_ENTRIES = 100  # facts in a MEMORY.md
PINNED_NOTES = 20
NOTE_CHARS = 500
PINNED_HEADING = "## Pinned notes"
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
    near: list[list[int]] = []
    for start in range(0, len(rows), _BLOCK):
        sims = matrix[start:start + _BLOCK] @ matrix.T
        near.extend([int(j) for j in np.flatnonzero(1.0 - s < max_distance)] for s in sims)
    return _pick(rows, near, min_size)


def find_lexical_clusters(rows: Sequence[dict[str, Any]], min_overlap: float = LEXICAL_OVERLAP,
                          min_size: int = MIN_OCCURRENCES) -> list[Cluster]:
    """Clusters by shared words, for a store without embeddings: two items are near when the
    Jaccard similarity of their content-word stems (``retrieval.words``) reaches ``min_overlap``.
    Items with fewer than ``LEXICAL_MIN_WORDS`` or more than ``LEXICAL_MAX_WORDS`` content words
    take no part (too little to compare; long texts such as conversation turns do not repeat as
    notes do), and in a large set the words of more than a tenth of the items count as stop words.
    Rows need id, content, promoted, created_at (title optional)."""
    words = [content_words(f"{r.get('title') or ''} {r['content']}") for r in rows]
    usable = [LEXICAL_MIN_WORDS <= len(w) <= LEXICAL_MAX_WORDS for w in words]
    postings: dict[str, list[int]] = {}
    for i, found in enumerate(words):
        if usable[i]:
            for word in found:
                postings.setdefault(word, []).append(i)
    common = max(50, len(rows) // 10)
    words = [frozenset(w for w in found if len(postings.get(w, ())) <= common) for found in words]
    near: list[list[int]] = []
    for i, found in enumerate(words):
        if not usable[i]:
            near.append([])
            continue
        shared = Counter(j for w in found for j in postings[w] if len(postings[w]) <= common)
        near.append(sorted(j for j, n in shared.items() if n / (len(found) + len(words[j]) - n) >= min_overlap))
    return _pick(list(rows), near, min_size)


def _pick(rows: list[dict[str, Any]], near: list[list[int]], min_size: int) -> list[Cluster]:
    """Clusters around centres, densest first (ties: oldest); each item in one cluster at most."""
    order = sorted(range(len(rows)), key=lambda i: (-len(near[i]), rows[i]["created_at"], rows[i]["id"]))
    taken: set[int] = set()
    out = []
    for i in order:
        if i in taken or len(near[i]) < min_size:
            continue
        members = [j for j in near[i] if j not in taken]
        if len(members) < min_size or i not in members:
            continue
        taken.update(members)
        if all(rows[j]["promoted"] for j in members):
            continue
        out.append(Cluster(rows[i], sorted((rows[j] for j in members), key=lambda r: r["id"])))
    return out


def fact_fields(cluster: Cluster) -> dict[str, Any]:
    """category, key, value, person, source_context and observed_at of the fact a cluster becomes
    (observed_at: when its newest member was said, or else stored: the time of the statement)."""
    centre = cluster.centre
    theme = centre.get("theme") or ""
    category = theme if theme in FACT_CATEGORIES else "preferences" if centre.get("type") == "preference" \
        else "other"
    persons = {m.get("person") for m in cluster.members}
    said = [m.get("observed_at") or m.get("created_at") for m in cluster.members]
    ids = ", ".join(str(m["id"]) for m in cluster.members)
    return {"category": category, "key": fact_key(centre.get("title"), centre["content"]),
            "value": centre["content"], "person": persons.pop() if len(persons) == 1 else None,
            "source_context": f"promoted from {len(cluster.members)} similar items ({ids})",
            "observed_at": max((when for when in said if when), default=None)}


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


def render_memory_markdown(facts: Sequence[Any], *, user_id: str | None = None, limit: int = MARKDOWN_ENTRIES,
                           pinned: Sequence[Any] = (), promoted: Mapping[int, int] | None = None) -> str:
    """A MEMORY.md for assistants that read memory from a file: the first ``limit`` of ``facts``
    under one heading per category (categories in a fixed order, keys alphabetical inside, so a
    re-export diffs cleanly), a fact promoted from repeated notes followed by how often it came
    up (``promoted``: fact id -> items), then the ``pinned`` notes. ``facts``: ``Fact`` objects
    or mappings; ``pinned``: items or mappings with ``content`` (and ``title``). Every entry is
    one line, and ``<``/``>`` are escaped, so stored text never starts a line or ends the comment."""
    lines = ["# MEMORY.md", ""]
    if user_id is not None:
        lines += [f"<!-- generated by navi-memory for user {_safe(user_id)}: facts by category, then pinned notes -->",
                  ""]
    chosen = list(facts)[:limit]
    notes = list(pinned)[:PINNED_NOTES]
    if not chosen and not notes:
        lines.append("_Nothing remembered yet._")
    counts = promoted or {}
    for category in FACT_CATEGORIES:
        group = sorted((f for f in chosen if _get(f, "category") == category),
                       key=lambda f: (str(_get(f, "key")), str(_get(f, "person") or "")))
        if not group:
            continue
        lines += [f"## {category.capitalize()}", ""]
        for fact in group:
            about = f" (about {_safe(_get(fact, 'person'))})" if _get(fact, "person") else ""
            seen = counts.get(_get(fact, "id")) if _has(fact, "id") else None
            lines.append(f"- **{_safe(str(_get(fact, 'key')).replace('_', ' '))}**: {_safe(_get(fact, 'value'))}"
                         f"{about}" + (f" (came up {seen} times)" if seen else ""))
        lines.append("")
    if notes:
        lines += [PINNED_HEADING, ""]
        for note in notes:
            title = _get(note, "title") if _has(note, "title") else None
            text = _safe(_get(note, "content"))
            text = text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS - 1].rstrip() + "…"
            lines.append(f"- **{_safe(title)}**: {text}" if title else f"- {text}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _safe(text: Any) -> str:
    """One line, with ``<`` and ``>`` (and their look-alikes) escaped: no HTML comment or tag can open or close."""
    return escape_tags(_one_line(text))


def _has(record: Any, name: str) -> bool:
    return name in record if isinstance(record, Mapping) else hasattr(record, name)


FACTS_HEADING = "## Known facts about the user"


def prompt_facts_block(facts: Sequence[Any], limit: int = PROMPT_FACTS) -> str | None:
    """The promoted facts for the stable half of a prompt (escaped, one line each), or None."""
    lines = list(renderable(list(facts)[:limit], _fact_line, "fact"))
    if not lines:
        return None
    return f'{FACTS_HEADING}\n\n<memory kind="facts">\n' + "\n".join(lines) + "\n</memory>"


def _fact_line(fact: Any) -> str:
    about = f" (about {escape(str(_get(fact, 'person')), True)})" if _get(fact, "person") else ""
    key = escape(str(_get(fact, "key")).replace("_", " "), True)
    return f"- {key}: {escape(str(_get(fact, 'value')), True)}{about}"


def _get(fact: Any, name: str) -> Any:
    return fact[name] if isinstance(fact, Mapping) else getattr(fact, name)


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())
