"""LangChain adapters: a retriever and the memory tools.

``NaviMemoryRetriever`` is a ``BaseRetriever`` over ``store.search`` for one user;
``NaviMemoryToolkit`` gives the memory tools (search, add note, save fact, get, archive, forget,
list themes) with the user bound at construction. Both call store methods only.

Needs the ``langchain`` extra (``langchain-core``).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool, BaseToolkit, StructuredTool
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from ..models import SearchResult
from ._tools import TOOLS, MemoryTools, StoreCaller

__all__ = ["NaviMemoryRetriever", "NaviMemoryToolkit", "result_to_document"]

SEARCH_FILTERS = ("theme", "types", "recency_days", "status", "person", "person_hints", "fusion", "recency",
                  "include_expired")


def result_to_document(result: SearchResult) -> Document:
    """A search result as a ``Document``: the content as text, the ranking and provenance as metadata."""
    metadata: dict[str, Any] = {
        "id": result.id, "score": result.score, "signals": dict(result.signals), "theme": result.theme,
        "type": result.type, "kind": result.kind,
        "created_at": result.created_at.isoformat() if result.created_at else None,
    }
    for name in ("title", "person"):
        if getattr(result, name):
            metadata[name] = getattr(result, name)
    if result.observed_at is not None:
        metadata["observed_at"] = result.observed_at.isoformat()
    if result.pinned:
        metadata["pinned"] = True
    if result.fact:
        metadata["fact"] = dict(result.fact)
    return Document(id=str(result.id), page_content=result.content, metadata=metadata)


class NaviMemoryRetriever(BaseRetriever):
    """Hybrid memory search for one user as a LangChain retriever.

    ``NaviMemoryRetriever(store=store, user_id="u1", k=8)``; ``store`` is a ``MemoryStore`` or an
    ``AsyncMemoryStore`` (give both as ``store=`` and ``async_store=`` for native sync and async).
    The search filters (``theme``, ``types``, ``recency_days``, ``status``, ``person``, ...) are
    fields, and ``k`` and any filter can also be given per call: ``retriever.invoke(q, k=3)``.
    With only a ``MemoryStore``, ``ainvoke`` runs the search in a worker thread.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any = Field(default=None, description="MemoryStore (or AsyncMemoryStore)")
    async_store: Any = Field(default=None, description="AsyncMemoryStore for native async calls")
    user_id: str
    k: int = Field(default=8, ge=1, le=50)
    theme: Optional[str] = None
    types: Optional[Sequence[str]] = None
    recency_days: Optional[float] = None
    status: str = "active"
    person: Optional[str] = None
    person_hints: Sequence[str] = ()
    fusion: Optional[str] = None
    recency: str = "decay"
    include_expired: bool = False

    _caller: StoreCaller = PrivateAttr()

    @model_validator(mode="after")
    def _bind(self) -> "NaviMemoryRetriever":
        self._caller = StoreCaller(self.store, self.async_store)
        return self

    def _search_args(self, query: str, k: Optional[int], overrides: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        overrides.pop("verbose", None)
        unknown = set(overrides) - set(SEARCH_FILTERS)
        if unknown:
            raise TypeError(f"unknown search argument(s): {', '.join(sorted(unknown))}")
        kwargs = {name: getattr(self, name) for name in SEARCH_FILTERS}
        kwargs.update(overrides)
        return (query,), {"user_id": self.user_id, "limit": self.k if k is None else k, **kwargs}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: Optional[int] = None, **filters: Any) -> list[Document]:
        args, kwargs = self._search_args(query, k, filters)
        return [result_to_document(r) for r in self._caller.call("search", *args, **kwargs)]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: Optional[int] = None, **filters: Any) -> list[Document]:
        args, kwargs = self._search_args(query, k, filters)
        return [result_to_document(r) for r in await self._caller.acall("search", *args, **kwargs)]


def _make_tool(tools: MemoryTools, name: str) -> StructuredTool:
    schema, description = TOOLS[name]
    func, coroutine = tools.functions(name)
    return StructuredTool.from_function(func=func, coroutine=coroutine, name=name, description=description,
                                        args_schema=schema)


class NaviMemoryToolkit(BaseToolkit):
    """The memory tools for one user: ``NaviMemoryToolkit(store=store, user_id="u1").get_tools()``.

    Tools: ``memory_search``, ``memory_add_note``, ``memory_save_fact``, ``memory_get``,
    ``memory_archive``, ``memory_forget``, ``memory_list_themes`` (``include=`` picks a subset).
    The user id is bound here; no tool takes it as an argument. Each tool returns JSON text;
    failures come back as ``{"error": ...}`` instead of raising into the agent loop.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any = None
    async_store: Any = None
    user_id: str
    include: Optional[Sequence[str]] = None

    _tools: MemoryTools = PrivateAttr()

    @model_validator(mode="after")
    def _bind(self) -> "NaviMemoryToolkit":
        unknown = set(self.include or ()) - set(TOOLS)
        if unknown:
            raise ValueError(f"unknown memory tool(s): {', '.join(sorted(unknown))}")
        self._tools = MemoryTools(self.store, self.user_id, async_store=self.async_store)
        return self

    def get_tools(self) -> list[BaseTool]:
        names = [n for n in TOOLS if self.include is None or n in self.include]
        return [_make_tool(self._tools, name) for name in names]
