"""One mypy run for the whole suite: the package files of [tool.mypy] in pyproject.toml (what
`python -m mypy` checks) and the probes in tests/typing/, with that configuration (strict). Each
typing test reads its own file's lines from the shared report; a run takes about 20 s, so three
runs (as before) cost a minute of every suite."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBES = ROOT / "tests" / "typing"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the suite runs on 3.11
    import tomli as tomllib


@dataclass(frozen=True)
class MypyReport:
    out: str
    err: str
    status: int

    def lines_of(self, path: Path) -> list[str]:
        """The report's lines about one file (mypy names a file under the current folder relative to it)."""
        return [line for line in self.out.splitlines()
                if ":" in line and Path(line.split(":", 1)[0]).resolve() == path.resolve()]

    def errors_of(self, path: Path) -> list[str]:
        return [line for line in self.lines_of(path) if ": error:" in line]


def package_files() -> list[Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [ROOT / name for name in config["tool"]["mypy"]["files"]]


@functools.lru_cache(maxsize=None)
def mypy_report() -> MypyReport:
    from mypy import api

    probes = sorted(PROBES.glob("*.py"))
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--no-incremental",
                                *map(str, package_files()), *map(str, probes)])
    return MypyReport(out, err, status)
