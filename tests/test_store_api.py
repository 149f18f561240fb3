"""The typed public API: generated methods in step with the operations, and what mypy sees."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.operations import StoreOperations
from navi_memory.operations.facts import FactOperations
from navi_memory.operations.keyed import KeyedOperations
from navi_memory.operations.memory import MemoryOperations
from navi_memory.operations.persons import PersonOperations
from navi_memory.operations.search import SearchOperations
from navi_memory.operations.sessions import SessionOperations
from navi_memory.operations.transfer import TransferOperations

from .typing_support import PROBES, expected, mypy_report

ROOT = Path(__file__).resolve().parent.parent


def test_generated_methods_are_up_to_date() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_store_api.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


CONCERNS = [MemoryOperations, SearchOperations, FactOperations, SessionOperations, PersonOperations, TransferOperations,
            KeyedOperations]


def operations() -> dict[str, object]:
    found: dict[str, object] = {}
    for concern in CONCERNS:
        for name, fn in inspect.getmembers(concern):
            if getattr(fn, "_navi_operation", False):
                assert name not in found, f"two concerns have an operation {name}"
                found[name] = fn
    return found


def test_the_store_operations_hold_one_object_per_concern() -> None:
    assert StoreOperations.__mro__ == (StoreOperations, object)  # composition, not a mixin diamond
    for concern in CONCERNS:
        assert concern.__mro__ == (concern, object)


@pytest.mark.parametrize("name", sorted(operations()))
def test_both_stores_have_every_operation_with_its_signature(name: str) -> None:
    operation = operations()[name]
    expected = inspect.signature(operation)
    sync, async_ = getattr(MemoryStore, name), getattr(AsyncMemoryStore, name)
    assert not inspect.iscoroutinefunction(sync) and inspect.iscoroutinefunction(async_)
    for method in (sync, async_):
        got = inspect.signature(method)
        assert got.parameters == expected.parameters
        assert method.__doc__ == operation.__doc__
        assert not inspect.isgeneratorfunction(method)


@pytest.mark.xdist_group("mypy")  # one mypy run (typing_support): one process
def test_mypy_sees_the_real_types_of_the_public_api() -> None:
    report = mypy_report()
    probe = PROBES / "probe.py"
    revealed = re.findall(r'Revealed type is "([^"]+)"', "\n".join(report.lines_of(probe)))
    assert revealed == ["navi_memory.models.SearchResults", "int", "navi_memory.models.FactChange"] * 2, report.out
    # no error, and the ignore on the bad call is used (strict reports an unused one): mypy did object to it
    assert report.errors_of(probe) == [], report.out + report.err


@pytest.mark.xdist_group("mypy")  # one mypy run (typing_support): one process
def test_mypy_reports_exactly_what_the_truth_probe_expects() -> None:
    """A misspelt field of a search result or keyword of add / update, a wrong type to a store call
    or an adapter's recorded call, a method the backend Protocol lacks: each an error (and only
    those); iterating a result list gives its model, the backend is the Protocol."""
    report = mypy_report()
    probe = PROBES / "truth_probe.py"
    assert report.findings_of(probe) == expected(probe), report.out + report.err


@pytest.mark.xdist_group("mypy")  # one mypy run (typing_support): one process
def test_mypy_finds_no_error_in_the_public_api_and_the_probes() -> None:
    """The check `python -m mypy` makes ([tool.mypy] in pyproject.toml), made once with the probes'
    (.ci/run runs no separate mypy): no error but those the truth probe expects."""
    report = mypy_report()
    probe = PROBES / "truth_probe.py"
    others = [line for line in report.out.splitlines() if ": error:" in line and line not in report.errors_of(probe)]
    wanted = len([line for line in expected(probe) if ": error:" in line])
    assert not others and report.err == "", report.out + report.err
    assert report.out.splitlines()[-1].startswith(f"Found {wanted} errors in 1 file"), report.out


def _raise_bug(*args: object, **kwargs: object) -> None:
    raise RuntimeError("a bug in the backend")


def _frames(exc: BaseException) -> list[str]:
    import traceback

    return [f"{frame.filename.rsplit('/', 1)[-1]}:{frame.name}" for frame in traceback.extract_tb(exc.__traceback__)]


def test_an_unexpected_error_keeps_the_operations_line_in_the_traceback(store, monkeypatch) -> None:
    monkeypatch.setattr(store.backend, "get_item", _raise_bug)
    with pytest.raises(RuntimeError, match="a bug in the backend") as info:
        store.get(1, user_id="u1")
    assert "memory.py:_require_item" in _frames(info.value)
    assert "memory.py:get" in _frames(info.value)


async def test_an_unexpected_error_keeps_the_operations_line_in_the_async_traceback(db_url, fake_embeddings) -> None:
    astore = await AsyncMemoryStore.open(db_url, embeddings=fake_embeddings)
    try:
        astore.backend.get_item = _raise_bug  # the async backend awaits what this returns: never reached
        with pytest.raises(RuntimeError, match="a bug in the backend") as info:
            await astore.get(1, user_id="u1")
        assert "memory.py:get" in _frames(info.value)
    finally:
        await astore.close()
