"""The loop of the multi-process tests: a real process repeating one step against the store until
told to stop, logging each call as a JSON line once it returned (an acknowledged write is one the
store reported done)."""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any, Callable

from navi_memory import MemoryStore


def repeat(open_store: Callable[[], MemoryStore], step: Callable[[MemoryStore, int], dict[str, Any]], log: str,
           started: Any, done: Any) -> None:
    """Open the store, wait at ``started`` (a Barrier), then run ``step(store, n)`` for n = 0, 1, ...
    until ``done`` (an Event) is set; anything the opening raised is logged as an error line."""
    with open(log, "a") as out:
        try:
            with open_store() as store:
                started.wait()
                n = 0
                while not done.is_set():
                    out.write(json.dumps(step(store, n)) + "\n")
                    out.flush()
                    n += 1
        except Exception:
            out.write(json.dumps({"error": traceback.format_exc()}) + "\n")


def lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a ``repeat`` wrote (none if it never started)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
