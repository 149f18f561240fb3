"""The package's docstrings and comments say what a reader can check, not which internal spec
("seed 002") a rule came from."""

from __future__ import annotations

import re
from pathlib import Path

import navi_memory

PACKAGE = Path(navi_memory.__file__).parent


def test_no_seed_numbers_in_the_package_source():
    cited = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"\bseeds?(?:'s?)?\s+0\d\d|\bthe seeds\b", line, re.IGNORECASE)]
    assert cited == []
