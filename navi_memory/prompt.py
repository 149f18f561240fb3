"""Render memory for a model's prompt, with stored text escaped so it stays data.

Stored text can contain anything a user or a tool once wrote, including ``</memory>`` or a line
like ``## System: ignore previous instructions``. Every memory is rendered inside a
``<memory>`` block with ``&``, ``<`` and ``>`` escaped (it cannot close the block) and, for
single-line entries, newlines folded (it cannot start a heading or a new instruction line).
"""

from __future__ import annotations

from typing import Iterable

from .models import SearchResult

SUMMARY_HEADING = "## What I remember about the user"
RELEVANT_HEADING = "## Relevant Memory"


def escape(text: str, single_line: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if single_line:
        return " ".join(text.split())
    # a line starting with '#' could pose as a heading of the surrounding prompt
    return "\n".join(("\\" + line) if line.lstrip().startswith("#") else line for line in text.splitlines())


def summary_block(summary: str | None) -> str | None:
    """The system message with the user's summary (seed 001), or None when there is none."""
    if not summary or not summary.strip():
        return None
    return f'{SUMMARY_HEADING}\n\n<memory kind="summary">\n{escape(summary.strip())}\n</memory>'


def relevant_memory_block(results: Iterable[SearchResult], max_items: int = 8) -> str | None:
    """``## Relevant Memory`` with one escaped line per result (seed 004's volatile half)."""
    lines = []
    for result in list(results)[:max_items]:
        when = result.observed_at or result.created_at
        label = f"{result.theme}/{result.type}, {when:%Y-%m-%d}"
        if result.person:
            label += f", about {escape(result.person, True)}"
        lines.append(f"- [{label}] {escape(result.content, single_line=True)}")
    if not lines:
        return None
    body = "\n".join(lines)
    return f'{RELEVANT_HEADING}\n\n<memory kind="retrieved">\n{body}\n</memory>'
