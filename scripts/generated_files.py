"""What the generators of scripts/ share: write the files they generate, or with ``--check`` only
say which are out of date (exit 1), as the test suite runs them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def write_or_check(script: str, description: str, argv: list[str] | None,
                   texts: Callable[[], dict[Path, str]]) -> int:
    """Rewrite each path of ``texts()`` whose text differs; with ``--check`` list them and return 1."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in texts().items():
        if path.exists() and path.read_text() == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"out of date: {', '.join(stale)}; run python scripts/{script}", file=sys.stderr)
        return 1
    return 0
