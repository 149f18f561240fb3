"""docs/architecture.md names every module of the package, once, under "Every module", and only
modules that exist: a new module without its line there (or a line left behind by a removed one)
fails here."""

from __future__ import annotations

import re
from pathlib import Path

import navi_memory

PACKAGE = Path(navi_memory.__file__).parent
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _listed() -> list[str]:
    """The module paths of the table rows of the "Every module" section, in order."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = re.search(r"^## Every module\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert section is not None, "docs/architecture.md has no '## Every module' section"
    return re.findall(r"^\| `([^`]+\.py)` \|", section.group(1), re.MULTILINE)


def test_architecture_lists_every_module_once():
    modules = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")}
    listed = _listed()
    assert sorted(modules - set(listed)) == [], "modules missing from docs/architecture.md"
    assert sorted(set(listed) - modules) == [], "docs/architecture.md lists modules that do not exist"
    assert sorted(m for m in set(listed) if listed.count(m) > 1) == []
