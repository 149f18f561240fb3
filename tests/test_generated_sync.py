"""The blocking runners are generated from the async ones (scripts/gen_sync.py): in step with
their source, and made by a transform that keeps comments and refuses what it cannot twin."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.backends.postgres.pipelined import AsyncSharedReads, SharedReads

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # as when the script runs: its helper module beside it
_spec = importlib.util.spec_from_file_location("gen_sync", ROOT / "scripts" / "gen_sync.py")
assert _spec is not None and _spec.loader is not None
gen_sync = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_sync)


def test_generated_twins_are_up_to_date() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_sync.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("name", gen_sync.FILES)
def test_a_hand_edit_of_a_generated_twin_is_undone(name: str) -> None:
    text = (ROOT / name).read_text()
    header = next(line for line in text.splitlines(keepends=True) if gen_sync.TARGET.match(line))
    before, twin = text.split(header, 1)
    edited = before + header + "    # a hand edit\n" + twin.replace("\n", "  # another\n", 1)
    assert gen_sync.regenerate(edited) == text


def test_the_transform_keeps_comments_and_layout() -> None:
    source = textwrap.dedent('''\
        async def fetch(self, name: str,
                        tries: int = 3) -> Any:
            """Docstring kept."""
            async with self.pool.connection() as conn:  # one connection
                async for row in conn.rows():
                    await asyncio.sleep(0)
                rows = await conn.execute("SELECT 1")
            return await self._caller.acall(name), await psycopg.AsyncConnection.connect(rows)
        ''')
    assert gen_sync.blocking(source) == textwrap.dedent('''\
        def fetch(self, name: str,
                  tries: int = 3) -> Any:
            """Docstring kept."""
            with self.pool.connection() as conn:  # one connection
                for row in conn.rows():
                    time.sleep(0)
                rows = conn.execute("SELECT 1")
            return self._caller.call(name), psycopg.Connection.connect(rows)
        ''')


@pytest.mark.parametrize("code", ["async def f():\n    await asyncio.gather(a(), b())\n",
                                  "async def f(x):\n    await x.aclose()\n"])
def test_the_transform_refuses_what_it_cannot_twin(code: str) -> None:
    with pytest.raises(SystemExit, match="no blocking twin"):
        gen_sync.blocking(code)


@pytest.mark.parametrize("sync_cls, async_cls, names", [
    (MemoryStore, AsyncMemoryStore, ["open", "migrate", "wait_for_background", "_execute", "_outcome", "_run"]),
    (SharedReads, AsyncSharedReads, ["run_shared", "_pipelined"]),
])
def test_each_twin_is_blocking_where_its_source_is_async(sync_cls: type, async_cls: type, names: list[str]) -> None:
    for name in names:
        assert not inspect.iscoroutinefunction(getattr(sync_cls, name)), name
        assert inspect.iscoroutinefunction(getattr(async_cls, name)), name
