"""Compare two coverage.py JSON reports of the suite (line and branch): the totals, and for every
module whose source is the same at both commits, the lines and branches covered before and not after.

    python -m pytest -n 2 --dist loadgroup --cov=navi_memory --cov-branch --cov-report=json:before.json  # at commit A
    python scripts/compare_coverage.py before.json after.json A B
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _files(report: dict) -> dict[str, dict]:
    """The report's files by their path from ``navi_memory/`` on (reports name absolute paths)."""
    return {name[name.find("navi_memory/"):]: data for name, data in report["files"].items()}


def _source(commit: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"], capture_output=True).stdout


def main(before_path: str, after_path: str, before_commit: str, after_commit: str) -> int:
    before, after = (json.loads(Path(p).read_text()) for p in (before_path, after_path))
    for name, report in (("before", before), ("after", after)):
        t = report["totals"]
        print(f"{name}: {t['num_statements']} statements, {t['missing_lines']} missed; {t['num_branches']} branches,"
              f" {t['num_partial_branches']} partial; {t['percent_covered']:.2f}%")
    old, new = _files(before), _files(after)
    same = [p for p in sorted(set(old) & set(new)) if _source(before_commit, p) == _source(after_commit, p)]
    lost = []
    for path in same:
        lines = set(new[path]["missing_lines"]) - set(old[path]["missing_lines"])
        branches = ({tuple(b) for b in new[path].get("missing_branches", [])}
                    - {tuple(b) for b in old[path].get("missing_branches", [])})
        if lines or branches:
            lost.append(path)
            print(f"  {path}: lines {sorted(lines)} branches {sorted(branches)} no longer covered")
    print(f"{len(same)} modules with the same source; {len(lost)} lost coverage")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
