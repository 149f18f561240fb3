"""Run LangGraph's own store test suites, unchanged, against NaviStore.

``python -m tests.conformance.harness --backend sqlite|postgres [--postgres-url URL] [--json OUT]``

Each test file of the suites of ``../shared/conformance/langgraph-store`` (``memory``, ``sqlite``,
``postgres``) is copied into a temporary ``tests`` package of its own, beside ``navi_shims.py``
(``shims.py``) and with ``suite_conftest.py`` as its conftest, and run by pytest in a subprocess
(all files at once: they mostly sleep on TTLs, so one file's sleeps overlap another's). The test files are
copied byte for byte. The outcome of every test id is read from pytest's JUnit XML and each test
function is judged: passed (all its ids passed), failed, or listed in ``expected.py`` as not
applicable (it inspects the original store's internals, or exercises no store at all).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SUITES_DIR = REPO.parent / "shared" / "conformance" / "langgraph-store"
SUITES = {"memory": ["test_store.py"], "sqlite": ["test_store.py", "test_async_store.py", "test_ttl.py"],
          "postgres": ["test_store.py", "test_async_store.py"]}
TIMEOUT = 900


def slash_free_url(url: str) -> str:
    """The server URL with a socket directory moved into the host part, percent-encoded: LangGraph's
    fixtures cut the database name off at the last ``/``."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    host = query.pop("host", None)
    if host is None or not host.startswith("/"):
        return url
    user = parts.netloc.split("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=user + quote(host, safe=""), query=urlencode(query)))


def assemble(suite: str, name: str, root: Path) -> Path:
    """The suite's files (one imports another) copied into ``root/suite-stem/tests`` with the shims,
    to run its file ``name``; the directory."""
    where = root / f"{suite}-{Path(name).stem}"
    package = where / "tests"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copyfile(SUITES_DIR / "embed_test_utils.py", package / "embed_test_utils.py")
    for each in SUITES[suite]:
        shutil.copyfile(SUITES_DIR / suite / each, package / each)
    shutil.copyfile(HERE / "suite_conftest.py", package / "conftest.py")
    shutil.copyfile(HERE / "shims.py", where / "navi_shims.py")
    return where


def run_file(suite: str, name: str, backend: str, postgres_url: str, root: Path, extra: list[str],
             one_kind: bool = False) -> dict[str, str]:
    """Every test id of the suite's file ``name`` with its outcome (passed, failed, skipped).
    ``one_kind``: the PostgreSQL suite's ``store`` fixture only as ``default`` (``suite_conftest.py``)."""
    where = assemble(suite, name, root)
    report = where / "report.xml"
    scratch = where / "tmp"
    scratch.mkdir()
    env = {**os.environ, "NAVI_CONFORMANCE_BACKEND": backend, "NAVI_CONFORMANCE_POSTGRES_URL": postgres_url,
           "PYTHONPATH": os.pathsep.join([str(where), str(REPO)]),
           "NAVI_CONFORMANCE_ONE_CONNECTION_KIND": "1" if one_kind else "0",
           # the stores' SQLite files go under ``root``, which the caller's tmp_path cleans up
           "TMPDIR": str(scratch)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function",
               "--rootdir", str(where), f"--junitxml={report}", f"tests/{name}", *extra]
    (where / "env.sh").write_text("".join(f"export {k}='{env[k]}'\n" for k in (
        "NAVI_CONFORMANCE_BACKEND", "NAVI_CONFORMANCE_POSTGRES_URL", "PYTHONPATH")))
    subprocess.run(command, cwd=where, env=env, timeout=TIMEOUT, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    if not report.exists():
        raise RuntimeError(f"the {suite} suite's {name} wrote no report (pytest did not run)")
    return outcomes(report, suite)


def outcomes(report: Path, suite: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{suite}/{case.get('classname', '').split('.')[-1]}.py::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[name] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed")
    return found


def function_of(test_id: str) -> str:
    """``suite/file.py::test_x[param]`` -> ``suite/file.py::test_x``."""
    return test_id.split("[", 1)[0]


def judge(results: dict[str, str]) -> dict[str, Any]:
    """Per test function: not applicable or exercising no store (``expected.py``, with the reason),
    else passed (all its ids passed) or failed (with its failing ids)."""
    from .expected import NO_STORE, NOT_APPLICABLE

    functions: dict[str, list[tuple[str, str]]] = {}
    for test_id, outcome in sorted(results.items()):
        functions.setdefault(function_of(test_id), []).append((test_id, outcome))
    passed: list[str] = []
    failed: dict[str, list[str]] = {}
    apart: dict[str, str] = {}
    no_store: dict[str, str] = {}
    for function, runs in functions.items():
        if function in NOT_APPLICABLE:
            apart[function] = NOT_APPLICABLE[function]
        elif function in NO_STORE:
            no_store[function] = NO_STORE[function]
        elif all(outcome == "passed" for _, outcome in runs):
            passed.append(function)
        else:
            failed[function] = [test_id for test_id, outcome in runs if outcome != "passed"]
    return {"functions": len(functions), "passed": passed, "failed": failed, "not_applicable": apart,
            "no_store": no_store, "ids": len(results), "ids_passed": sum(o == "passed" for o in results.values())}


def summary(report: dict[str, Any]) -> str:
    judged = report["functions"] - len(report["not_applicable"]) - len(report["no_store"])
    return (f"{report['backend']}: {len(report['passed'])} of {judged} test functions pass "
            f"({len(report['failed'])} fail); apart: {len(report['not_applicable'])} inspect the original stores' "
            f"internals, {len(report['no_store'])} exercise no store; {report['functions']} in all "
            f"({report['ids_passed']} of {report['ids']} test ids pass)")


def run(backend: str, postgres_url: str, suites: list[str] | None = None, extra: list[str] | None = None,
        keep: str | None = None, one_kind: bool = False) -> dict[str, Any]:
    """Run the suites (``keep``: in this new directory, left there to read and rerun; ``one_kind``:
    see ``run_file``)."""
    results: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="navi-langgraph-suites-") as temporary:
        root = Path(keep or temporary)
        files = [(suite, name) for suite in suites or list(SUITES) for name in SUITES[suite]]
        # every file at once: they mostly sleep (TTLs) and wait on the database
        with concurrent.futures.ThreadPoolExecutor(len(files)) as pool:
            for found in pool.map(lambda file: run_file(*file, backend, slash_free_url(postgres_url), root,
                                                        extra or [], one_kind), files):
                results.update(found)
    return {"backend": backend, **judge(results), "results": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--postgres-url", default=os.environ.get("NAVI_MEMORY_TEST_POSTGRES_URL", ""),
                        help="a PostgreSQL server with pgvector (the PostgreSQL suite makes databases there)")
    parser.add_argument("--suite", action="append", choices=list(SUITES), help="only these suites")
    parser.add_argument("--json", help="write the whole report here")
    parser.add_argument("--one-connection-kind", action="store_true",
                        help="the PostgreSQL suite's store fixture as 'default' only (its 'pipe' and 'pool' kinds "
                             "build the same NaviStore): a third of its time (the test suite's setting)")
    parser.add_argument("--keep", help="assemble the suites in this new directory and leave them there "
                        "(each test file runs again with pytest in DIR/SUITE-FILE and its env in DIR/SUITE-FILE/env.sh)")
    args, extra = parser.parse_known_args(argv)
    url, server = args.postgres_url, None
    if not url:
        import pgserver

        server = pgserver.get_server(tempfile.mkdtemp(prefix="navi-pg-"), cleanup_mode="delete")
        url = server.get_uri()
    try:
        report = run(args.backend, url, args.suite, extra, args.keep, args.one_connection_kind)
    finally:
        if server is not None:
            server.cleanup()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print(summary(report))
    for function, ids in report["failed"].items():
        print(f"  FAILED {function} ({len(ids)} ids)")
    return 0 if not report["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
