"""The I/O an operation asks its runner for: each ``yield`` in an operation is one ``Call``.

``db(name, ...)`` is a backend method (``backends.base.Backend``), ``at_once`` several calls the
runner may run concurrently; "embed", "llm" and "spawn" calls are built by the operations that
need them. The runners (``store.MemoryStore`` / ``AsyncMemoryStore``) execute them; nothing else
knows how.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Call(NamedTuple):
    """One unit of I/O requested by an operation: ``target`` is "db", "embed", "llm", "spawn", or
    "all" (``args``: independent calls the runner may run concurrently, see ``at_once``)."""

    target: str
    name: str
    args: tuple
    kwargs: dict


def db(name: str, *args: Any, **kwargs: Any) -> Call:
    return Call("db", name, args, kwargs)


def at_once(*calls: Call) -> Call:
    """Independent calls that may run concurrently (each backend call takes its own connection).
    The operation receives ``[(value, error), ...]`` in order; ``error`` is the NaviMemoryError a
    call raised, else None."""
    return Call("all", "", calls, {})
