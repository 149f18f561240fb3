"""The ``Backend`` Protocol is complete and true: operations ask only for its methods, and every
backend (SQLite, PostgreSQL blocking and asyncio) has each with the Protocol's parameters."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import navi_memory
from navi_memory.backends.base import Backend
from navi_memory.backends.sqlite import SQLiteBackend

PROTOCOL = {n: f for n, f in vars(Backend).items() if inspect.isfunction(f) and not n.startswith("_")}


def _parameters(fn) -> list[tuple[str, object, object]]:
    sig = inspect.signature(inspect.unwrap(fn))
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def _backend_classes() -> list[type]:
    classes: list[type] = [SQLiteBackend]
    if pytest.importorskip("psycopg", reason="the postgres extra is not installed"):
        from navi_memory.backends.postgres.pool import AsyncPostgresBackend, PostgresBackend

        classes += [PostgresBackend, AsyncPostgresBackend]
    return classes


def test_operations_ask_only_for_protocol_methods():
    package = Path(navi_memory.__file__).parent
    asked = set()
    for path in package.rglob("*.py"):
        asked |= set(re.findall(r'\bdb\("([a-z_]+)"', path.read_text()))
    assert asked and asked <= set(PROTOCOL), sorted(asked - set(PROTOCOL))


@pytest.mark.parametrize("name", sorted(PROTOCOL))
def test_every_backend_has_the_method_with_the_protocol_parameters(name):
    expected = _parameters(PROTOCOL[name])
    for cls in _backend_classes():
        method = getattr(cls, name, None)
        assert method is not None, f"{cls.__name__} lacks {name}"
        assert _parameters(method) == expected, f"{cls.__name__}.{name}"


def test_mypy_accepts_the_sqlite_backend_as_a_backend():
    from mypy import api

    probe = Path(__file__).parent / "typing" / "backend_probe.py"
    out, err, status = api.run(["--strict", "--follow-imports=silent", "--no-incremental", str(probe)])
    assert status == 0, out + err
