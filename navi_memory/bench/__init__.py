"""Benchmarks run by ``navi-memory bench ...`` (numpy + standard library only)."""

import json
import os
import sys
from pathlib import Path
from typing import Any

# OpenBLAS keeps its threads spinning for about 0.1 s after each multi-threaded call (its default
# thread timeout). The latency bench times a bare two-thread scan between searches, and the spinning
# thread then held one of the two cores through the next search. Set before OpenBLAS loads (with
# numpy), idle threads sleep at once; the bench's report says which timeout applied. The CLI
# imports this first, so its other processes (serve, mcp) do not keep idle threads spinning either.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
BLAS_THREAD_TIMEOUT = os.environ.get("OPENBLAS_THREAD_TIMEOUT")  # None: OpenBLAS's default


def write_report(path: str | Path, report: dict[str, Any]) -> None:
    """A bench's JSON report, its folder made if missing (a long run must not end on a bad path)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
