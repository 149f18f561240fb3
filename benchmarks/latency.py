"""Latency and ingest benchmark, same code as ``navi-memory bench latency`` (SQLite by default;
PostgreSQL with ``--db postgresql://...`` or ``--postgres pgserver``).

    python benchmarks/latency.py --n 10000,100000 [--queries 200] [--dim 384] [--json OUT]
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # works from a checkout without installing
    from navi_memory.bench.latency import main as run

    run()


if __name__ == "__main__":
    main()
