"""One mypy run for the whole suite: the package files of [tool.mypy] in pyproject.toml (what
`python -m mypy` checks) and the probes in tests/typing/, with that configuration (strict). Each
typing test reads its own file's lines from the shared report; a run takes about 20 s, so three
runs (as before) cost a minute of every suite."""

from __future__ import annotations

import functools
import re
import sys
import tokenize
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

    def findings_of(self, path: Path) -> list[str]:
        """``line: error|note: message`` for each error and note about one file, as ``expected`` writes them."""
        return [line.split(":", 1)[1].strip() for line in self.lines_of(path)
                if ": error:" in line or ": note:" in line]


EXPECTATION = re.compile(r"#\s*([EN]):\s*(.*?)\s*(?=#\s*[EN]:|$)")


def expected(path: Path) -> list[str]:
    """What a probe says mypy reports about it (mypy's test-data convention): ``# E: message  [code]``
    an error, ``# N: message`` a note, on the line the comment ends, or, for a comment on a line of
    its own, on the code line above it."""
    out: list[str] = []
    code_line = 0
    with path.open(encoding="utf-8") as source:
        for token in tokenize.generate_tokens(source.readline):
            if token.type == tokenize.COMMENT:
                on_its_own = not token.line[:token.start[1]].strip()
                for kind, message in EXPECTATION.findall(token.string):
                    line = code_line if on_its_own else token.start[0]
                    out.append(f"{line}: {'error' if kind == 'E' else 'note'}: {message}")
            elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                code_line = token.end[0]
    return out


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
