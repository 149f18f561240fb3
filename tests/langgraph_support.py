"""LangGraph ``BaseStore`` implementations under test, each with a way to move its clock.

A ``StoreCase`` holds the store, its ``kind`` (``inmemory``, ``postgres``: LangGraph's own stores;
``navi``: ``NaviStore``), ``advance(minutes)`` (makes TTLs run out without waiting) and ``sweep()``
(deletes expired items). The behaviour tests state each kind's result, so the differences between
the implementations are assertions, and docs/integrations.md's comparison table repeats them.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pytest

from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage

from .chat_fakes import ScriptedChat
from .fakes import FakeEmbeddings

DIMS = 64
Make = Callable[..., "StoreCase"]
INDEX: dict[str, Any] = {"dims": DIMS, "fields": ["text"]}


class LangGraphEmbeddings(FakeEmbeddings, Embeddings):
    """The repo's deterministic hashing embedder as a LangChain ``Embeddings`` (LangGraph checks the type)."""


class ToolChat(ScriptedChat):
    """A scripted chat model that agents can bind tools to (the script decides the tool calls)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ToolChat":
        return self


def call(name: str, args: dict[str, Any], call_id: str = "call-1") -> AIMessage:
    """A scripted model turn that calls one tool."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


@dataclass
class StoreCase:
    name: str
    kind: str
    store: Any
    advance: Callable[[float], None]
    sweep: Callable[[], Any]
    tick: Callable[[], None] = field(default=lambda: time.sleep(0.005))
    cleanup: ExitStack = field(default_factory=ExitStack)

    @property
    def supports_ttl(self) -> bool:
        return bool(self.store.supports_ttl)


def index_config(index: bool | list[str]) -> Any:
    """``True``: the default test index (the ``text`` field); a list: those fields; ``False``: none."""
    if index is False:
        return None
    return {**INDEX, "embed": LangGraphEmbeddings(), **({"fields": index} if isinstance(index, list) else {})}


def inmemory_case(*, index: bool | list[str] = False, ttl: dict | None = None, bound: bool = True) -> StoreCase:
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore(index=index_config(index))

    def no_clock(minutes: float) -> None:
        raise AssertionError("InMemoryStore has no TTL")

    return StoreCase("inmemory", "inmemory", store, no_clock, lambda: None)


def postgres_case(url: str, *, index: bool | list[str] = False, ttl: dict | None = None,
                  bound: bool = True) -> StoreCase:
    """LangGraph's ``PostgresStore`` in the test's own schema (``url`` carries its search_path)."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    stack = ExitStack()
    store = stack.enter_context(PostgresStore.from_conn_string(url, index=index_config(index), ttl=ttl)) # type: ignore[arg-type]
    store.setup()

    def advance(minutes: float) -> None:
        # moving every deadline back is moving the clock forward (refresh uses NOW())
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE store SET expires_at = expires_at - make_interval(secs => %s)"
                         " WHERE expires_at IS NOT NULL", (minutes * 60,))

    return StoreCase("postgres", "postgres", store, advance, store.sweep_ttl, cleanup=stack)


def navi_case(url: str, *, index: bool | list[str] = False, ttl: dict | None = None,
              bound: bool = True) -> StoreCase:
    """``NaviStore`` over a ``MemoryStore`` at ``url`` (its own fake clock). ``bound``: bound to user
    ``u1`` (calls outside a run); else unbound, for tests whose runs name their users (LangGraph's
    own stores have no users: the other kinds ignore it)."""
    from navi_memory import MemoryStore
    from navi_memory import Settings
    from navi_memory.integrations.langgraph import NaviStore

    from .fakes import FakeClock

    clock = FakeClock()
    # the hashing fake is no judge of meaning: the conformance runs rank without the relevance floor
    # (NaviStore's floor, the store's: tests/test_scores.py)
    memory = MemoryStore.open(url, embeddings=FakeEmbeddings(dimensions=DIMS), clock=clock,
                              settings=Settings(url=url, min_similarity=0.0))
    fields = None if index is False else {"fields": index if isinstance(index, list) else INDEX["fields"]}
    store = NaviStore(memory, user_id="u1" if bound else None, index=fields, ttl=ttl)  # type: ignore[arg-type]
    stack = ExitStack()
    stack.callback(memory.close)
    return StoreCase("navi", "navi", store, lambda minutes: clock.advance(minutes=minutes), store.sweep_ttl,
                     tick=lambda: clock.advance(seconds=1), cleanup=stack)


IMPLEMENTATIONS = [
    pytest.param("inmemory", id="inmemory"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("navi-sqlite", id="navi-sqlite"),
    pytest.param("navi-postgres", id="navi-postgres", marks=pytest.mark.postgres),
]


# LangGraph's InMemoryStore has no TTL: the TTL cases run on the others only
TTL_IMPLEMENTATIONS = [p for p in IMPLEMENTATIONS if p.id != "inmemory"]


def _stores(request: pytest.FixtureRequest) -> Iterator[Make]:
    made: list[StoreCase] = []
    urls: list[str] = []

    def factory(**kwargs: object) -> StoreCase:
        if request.param == "inmemory":
            new = inmemory_case(**kwargs)  # type: ignore[arg-type]
        elif request.param == "postgres":
            server = request.getfixturevalue("postgres_server")
            urls.append(server.fresh_schema_url())
            new = postgres_case(urls[-1], **kwargs)  # type: ignore[arg-type]
        elif request.param == "navi-postgres":
            urls.append(request.getfixturevalue("postgres_server").fresh_schema_url())
            new = navi_case(urls[-1], **kwargs)  # type: ignore[arg-type]
        else:
            folder = request.getfixturevalue("tmp_path") / f"db{len(made)}"
            folder.mkdir()
            new = navi_case(f"sqlite:///{folder}/memory.db", **kwargs)  # type: ignore[arg-type]
        made.append(new)
        return new

    yield factory
    for done in made:
        done.cleanup.close()
    for url in urls:
        request.getfixturevalue("postgres_server").drop_schema(url)


@pytest.fixture(params=IMPLEMENTATIONS)
def make(request: pytest.FixtureRequest) -> Iterator[Make]:
    yield from _stores(request)


@pytest.fixture(params=TTL_IMPLEMENTATIONS)
def ttl_make(request: pytest.FixtureRequest) -> Iterator[Make]:
    yield from _stores(request)


@pytest.fixture
def ttl_case(ttl_make: Make) -> StoreCase:
    return ttl_make()


@pytest.fixture
def case(make: Make) -> StoreCase:
    return make()
