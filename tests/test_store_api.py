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


def test_mypy_sees_the_real_types_of_the_public_api() -> None:
    from mypy import api

    probe = Path(__file__).parent / "typing" / "probe.py"
    out, err, status = api.run(["--strict", "--follow-imports=silent", "--no-incremental", str(probe)])
    revealed = re.findall(r'Revealed type is "([^"]+)"', out)
    assert revealed == ["navi_memory.models.SearchResults", "int", "navi_memory.models.FactChange"] * 2, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert errors == [], out + err
    assert status == 0  # the ignore on the bad call is used: mypy did object to it


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
