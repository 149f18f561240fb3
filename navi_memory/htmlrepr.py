"""HTML tables for Jupyter's ``_repr_html_``: standard library only, every value escaped.

Notebooks render these instead of the plain ``repr``; stored text can hold markup (it comes from
conversations), so every cell goes through ``html.escape`` and nothing is ever marked safe.
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any, Callable, Iterable, Sequence

from .core.timeutil import minute_text

Column = tuple[str, Callable[[Any], Any]]

_TABLE = '<table class="navi-memory" style="border-collapse:collapse">'
_CELL = 'style="text-align:left;vertical-align:top;white-space:pre-wrap;padding:2px 8px"'


def cell_text(value: Any) -> str:
    """A value as short plain text (not yet escaped)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, datetime):
        return minute_text(value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={cell_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(cell_text(v) for v in value)
    return str(value)


def table(rows: Iterable[Any], columns: Sequence[Column], caption: str | None = None) -> str:
    head = "".join(f"<th {_CELL}>{escape(name)}</th>" for name, _ in columns)
    body = "".join("<tr>" + "".join(f"<td {_CELL}>{escape(cell_text(get(row)))}</td>" for _, get in columns) + "</tr>"
                   for row in rows)
    title = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f"{_TABLE}{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _signals(result: Any) -> str:
    return ", ".join(name for name, on in result.signals.items() if on) or "-"


def _history(fact: Any) -> str:
    return "; ".join(f"{h.value} (until {cell_text(h.valid_to)})" for h in fact.history)


SEARCH_COLUMNS: list[Column] = [
    ("id", lambda r: r.id), ("score", lambda r: r.score), ("signals", _signals), ("theme", lambda r: r.theme),
    ("type", lambda r: r.type), ("snippet", lambda r: r.snippet), ("score breakdown", lambda r: r.scores),
]
FACT_COLUMNS: list[Column] = [
    ("category", lambda f: f.category), ("key", lambda f: f.key), ("value", lambda f: f.value),
    ("source", lambda f: f.source), ("confidence", lambda f: f.confidence), ("expires", lambda f: f.expires_at),
    ("updated", lambda f: f.updated_at), ("history", _history),
]
SUMMARY_COLUMNS: list[Column] = [
    ("version", lambda s: s.version), ("created", lambda s: s.created_at), ("summary", lambda s: s.content),
]
ITEM_COLUMNS: list[Column] = [
    ("id", lambda i: i.id), ("theme", lambda i: i.theme), ("type", lambda i: i.type), ("status", lambda i: i.status),
    ("content", lambda i: i.content),
    ("embedding", lambda i: f"{i.embedding.state} {i.embedding.model or ''}".strip() if i.embedding else "none"),
    ("created", lambda i: i.created_at),
]
