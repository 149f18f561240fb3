"""LlamaIndex adapters: a retriever, a memory block for ``Memory``, and the memory tools.

- ``NaviMemoryRetriever``: a ``BaseRetriever`` over ``store.search`` returning ``NodeWithScore``.
- ``NaviMemoryBlock``: a ``BaseMemoryBlock[str]`` rendering the user's summary and relevant
  memories (or, ``mode="tools"``, the tool guidance) for ``Memory.from_defaults(memory_blocks=[...])``,
  and recording the conversation into a store session so the extraction pipeline runs on it.
- ``NaviMemoryToolSpec``: the memory tools (search, add note, save fact, get, archive, forget,
  list themes) for ``FunctionAgent(tools=spec.to_tool_list())``.

One instance of each serves every user: a call acts for the user named around it
(``with acting_for(user_id="u1"): await agent.run(...)``; contextvars, so concurrent runs in
other tasks or threads keep their own), else for ``user_id`` bound at construction. Both given
and different is a ``ValidationError``; neither is one too.

Everything here calls store methods only. Needs the ``llamaindex`` extra (``llama-index-core``).
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from typing import Any, Callable, List, Optional, TypeVar

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import ToolMetadata
from llama_index.core.tools.tool_spec.base import BaseToolSpec
from pydantic import Field, PrivateAttr, model_validator

from .. import prompt
from ..models import SearchResult
from ..operations.search import check_preset
from ._context import MemoryContextBuilder, last_user_text
from ._identity import IdentityResolver
from ._caller import StoreCaller, store_call
from ._tools import SCOPED, SEARCH_FILTERS, TOOLS, UNBOUND, MemoryTools

__all__ = ["NaviMemoryRetriever", "NaviMemoryBlock", "NaviMemoryToolSpec", "result_to_node"]

log = logging.getLogger("navi_memory.integrations")

HIDDEN_FROM_MODEL = ["id", "score", "signals", "kind", "fact"]
CONVERSATIONS_KEPT = 512
_OVERRIDES: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("navi_memory_retrieve_with", default={})
Who = tuple[str, str, Optional[str], Optional[str]]  # (user, session, agent_id, run_id) of a call
V = TypeVar("V")
ASSISTANT_ROLES = {"chatbot": "assistant", "model": "assistant"}


def result_to_node(result: SearchResult) -> NodeWithScore:
    """A search result as a ``NodeWithScore`` (the node id is the item id)."""
    metadata: dict[str, Any] = {"id": result.id, "score": result.score, "signals": dict(result.signals),
                                "theme": result.theme, "type": result.type, "kind": result.kind,
                                "created_at": result.created_at.isoformat() if result.created_at else None}
    if result.fact:
        metadata["fact"] = dict(result.fact)
    if result.person:
        metadata["person"] = result.person
    if result.superseded_by:  # what it says is past: a newer fact replaced it
        metadata["superseded_by"] = result.superseded_by
    node = TextNode(id_=str(result.id), text=result.content, metadata=metadata,
                    excluded_llm_metadata_keys=list(HIDDEN_FROM_MODEL),
                    excluded_embed_metadata_keys=list(HIDDEN_FROM_MODEL))
    return NodeWithScore(node=node, score=result.score)


class NaviMemoryRetriever(BaseRetriever):
    """``NaviMemoryRetriever(store, k=8, theme=..., ...)``: hybrid memory search for the user of the
    call (``acting_for``) or the bound ``user_id="u1"``.
    ``store`` is a ``MemoryStore`` or an ``AsyncMemoryStore`` (``aretrieve`` is native with
    the latter; with only a ``MemoryStore`` it runs in a worker thread). Extra keywords are search
    filters (``theme``, ``types``, ``recency_days``, ``status``, ``person``, ..., ``min_similarity``,
    ``filters``: metadata filters, ``namespace_prefix``, ``timezone``); ``agent_id`` / ``run_id`` keep the search
    to that scope, bound here or per call (``acting_for(user, agent_id=...)``).
    ``retrieve_with(query, **filters)`` (and ``aretrieve_with``) overrides them for one call."""

    def __init__(self, store: Any = None, user_id: str | None = None, *, async_store: Any = None, k: int = 8,
                 **search_kwargs: Any) -> None:
        _check_filters(search_kwargs)
        check_preset(search_kwargs)
        # exact or refused (ValidationError, a ValueError), never trimmed
        self._identity = IdentityResolver("NaviMemoryRetriever", user_id, agent_id=search_kwargs.pop("agent_id", None),
                                          run_id=search_kwargs.pop("run_id", None))
        super().__init__()
        self._caller = StoreCaller(store, async_store)
        self.user_id, self.k, self.search_kwargs = self._identity.user_id, k, search_kwargs

    def _search_kwargs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        _check_filters(overrides)
        who = self._identity.resolve(**{name: overrides.pop(name, None) for name in SCOPED})
        k = overrides.pop("k", self.k)
        return {"user_id": who.user_id, "limit": k, **self.search_kwargs, **overrides, **who.scope()}

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        results = self._caller.call(store_call.search(query_bundle.query_str,
                                                      **self._search_kwargs(dict(_OVERRIDES.get()))))
        return [result_to_node(r) for r in results]

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        results = await self._caller.acall(store_call.search(query_bundle.query_str,
                                           **self._search_kwargs(dict(_OVERRIDES.get()))))
        return [result_to_node(r) for r in results]

    def retrieve_with(self, query: str, **overrides: Any) -> List[NodeWithScore]:
        """``retrieve(query)`` with search arguments for this call only (``k``, ``filters``, ``theme``, ...)."""
        _check_filters(overrides)
        token = _OVERRIDES.set(overrides)  # a context value: retrieve() keeps LlamaIndex's callbacks
        try:
            return self.retrieve(query)
        finally:
            _OVERRIDES.reset(token)

    async def aretrieve_with(self, query: str, **overrides: Any) -> List[NodeWithScore]:
        """Coroutine of ``retrieve_with``."""
        _check_filters(overrides)
        token = _OVERRIDES.set(overrides)
        try:
            return await self.aretrieve(query)
        finally:
            _OVERRIDES.reset(token)


def _check_filters(kwargs: dict[str, Any]) -> None:
    unknown = set(kwargs) - set(SEARCH_FILTERS) - {"k"}
    if unknown:
        raise TypeError(f"unknown search argument(s): {', '.join(sorted(unknown))}")


def to_store_message(message: ChatMessage) -> dict[str, Any]:
    """A LlamaIndex chat message in the OpenAI-style form the store takes."""
    role = getattr(message.role, "value", message.role)
    extra = message.additional_kwargs or {}
    calls = [{"id": b.tool_call_id, "name": b.tool_name, "args": b.tool_kwargs}
             for b in message.blocks if isinstance(b, ToolCallBlock)]
    calls += list(extra.get("tool_calls") or [])
    return {"role": ASSISTANT_ROLES.get(role, role), "content": message.content or "", "tool_calls": calls,
            "tool_call_id": extra.get("tool_call_id"), "name": extra.get("name")}


def _fingerprint(message: ChatMessage) -> tuple[Any, str]:
    return (getattr(message.role, "value", message.role), message.content or "")


class NaviMemoryBlock(BaseMemoryBlock[str]):
    """The user's long-term memory as a block of ``llama_index.core.memory.Memory``.

    ``aget`` returns the summary and the ``## Relevant Memory`` block for the latest user message
    (searched once per user message, not per agent step; not for a greeting opening the
    conversation), or the tool guidance with ``mode="tools"``; nothing with the feature flag off or
    the kill switch on. LlamaIndex calls ``aput`` only for messages leaving the short-term window,
    so the block also records the chat history it is shown on each ``aget`` (each message once)
    into the store session ``session_id``, which fires the pipeline's triggers (``FunctionAgent``
    reads the memory again after its final answer, so a run is recorded whole; otherwise
    ``await block.arecord_memory(memory)`` records what the memory holds now).
    Memories below the relevance floor ``min_similarity`` (None: the store's
    ``NAVI_MEMORY_MIN_SIMILARITY``, 0: off) are left out of the block; the others go in as far as
    ``max_tokens`` allows (None: ``NAVI_MEMORY_INJECTION_TOKENS``), counted by ``token_counter``
    (text -> tokens; default: an approximate count).
    One block serves every user: ``aget``/``aput`` act for the user of ``acting_for(...)`` around
    the agent's run (or ``memory.aget(user_id=...)``), else for the bound ``user_id``; the session
    is ``acting_for``'s ``session_id``, else ``session_id`` here. ``agent_id`` / ``run_id``
    (``acting_for(user, agent_id=..., run_id=...)``, ``memory.aget(agent_id=...)``, else bound
    here) keep the search to that scope and scope the recorded conversation.
    """

    name: str = "navi_memory"
    description: Optional[str] = "Long-term memory of the user (navi-memory)."
    store: Any = None
    async_store: Any = None
    user_id: Optional[str] = None
    session_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    mode: str = "injection"
    k: int = Field(default=8, ge=1, le=50)
    record: bool = True
    search_kwargs: Optional[dict[str, Any]] = None
    min_similarity: Optional[float] = Field(default=None, ge=0, le=1)
    max_tokens: Optional[int] = Field(default=None, ge=1)
    token_counter: Optional[Callable[[str], int]] = None
    agent_id: Optional[str] = None
    run_id: Optional[str] = None

    _builder: MemoryContextBuilder = PrivateAttr()
    _identity: IdentityResolver = PrivateAttr()
    # per (user, session, agent, run): the messages recorded so far and the last search, for a few hundred
    # conversations at a time (oldest forgotten first: at worst one search or message is repeated)
    _seen: dict[Who, list[tuple[Any, str]]] = PrivateAttr(default_factory=dict)
    _cache: dict[Who, tuple[tuple[Optional[str], bool], str]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _bind(self) -> "NaviMemoryBlock":
        self._identity = IdentityResolver("NaviMemoryBlock", self.user_id, self.session_id, agent_id=self.agent_id,
                                          run_id=self.run_id)
        self._builder = MemoryContextBuilder(StoreCaller(self.store, self.async_store), mode=self.mode,
                                             k=self.k, search_kwargs=self.search_kwargs,
                                             min_similarity=self.min_similarity, max_tokens=self.max_tokens,
                                             token_counter=self.token_counter)
        return self

    def _who(self, block_kwargs: dict[str, Any]) -> Who:
        identity = self._identity.resolve(user_id=block_kwargs.get("user_id"),
                                          session_id=block_kwargs.get("session_id"),
                                          agent_id=block_kwargs.get("agent_id"), run_id=block_kwargs.get("run_id"))
        return identity.user_id, identity.session_id or self.session_id, identity.agent_id, identity.run_id

    @staticmethod
    def _scope(who: Who) -> dict[str, str]:
        return {name: value for name, value in zip(SCOPED, who[2:]) if value is not None}

    @staticmethod
    def _keep(table: dict[Who, V], who: Who, value: V) -> None:
        table.pop(who, None)
        table[who] = value
        while len(table) > CONVERSATIONS_KEPT:
            table.pop(next(iter(table)))

    async def _aget(self, messages: Optional[List[ChatMessage]] = None, **block_kwargs: Any) -> str:
        if not prompt.injection_enabled():
            return ""
        who = self._who(block_kwargs)
        messages = list(messages or [])
        if len(messages) > 1 and _fingerprint(messages[-1]) == _fingerprint(messages[-2]) \
                and _fingerprint(messages[-1])[0] == "user":
            messages.pop()  # Memory.aget(input=...) appends the user message the history already holds
        key = last_user_text(messages)
        cached = self._cache.get(who)
        if cached is None or cached[0] != key:
            context = await self._builder.abuild(*key, user_id=who[0], scope=self._scope(who))
            cached = (key, "" if context is None else "\n\n".join(t for t in (context.stable, context.volatile) if t))
            self._keep(self._cache, who, cached)
        await self._record(who, messages)  # after the search: this turn's extraction cannot race it
        return str(cached[1])

    async def _aput(self, messages: List[ChatMessage]) -> None:
        await self._record(self._who({}), messages, ejected=True)

    async def arecord_memory(self, memory: Any, **block_kwargs: Any) -> None:
        """Record what ``memory`` holds now (e.g. the answer that ended the agent's run)."""
        await self._record(self._who(block_kwargs), await memory.aget_all())

    async def _record(self, who: Who, messages: List[ChatMessage], ejected: bool = False) -> None:
        if not self.record or not prompt.injection_enabled():
            return
        seen = self._seen.get(who, [])
        if ejected:  # leaving the window: record what was never shown to aget
            shown = set(seen)
            new = [m for m in messages if _fingerprint(m) not in shown]
        else:
            prints = [_fingerprint(m) for m in messages]
            overlap = next((n for n in range(min(len(prints), len(seen)), 0, -1) if seen[-n:] == prints[:n]), 0)
            new = messages[overlap:]
            self._keep(self._seen, who, prints)
        rows = [to_store_message(m) for m in new]
        if not rows:
            return
        try:
            await self._builder.caller.acall(store_call.add_messages(who[1], rows, user_id=who[0], agent_id=who[2],
                                                                     run_id=who[3]))
        except Exception as exc:
            log.warning("the conversation could not be recorded: %s", exc)


class NaviMemoryToolSpec(BaseToolSpec):
    """The memory tools: ``NaviMemoryToolSpec(store).to_tool_list()``, acting for the user of
    ``acting_for(...)`` around the agent's run, else the bound ``user_id="u1"``.

    Tools: ``memory_search``, ``memory_add_note``, ``memory_save_fact``, ``memory_get``,
    ``memory_archive``, ``memory_forget``, ``memory_list_themes``; each returns JSON text and has
    a blocking and an async form. The user id is not an argument of any tool. In a multi-person
    household (``household="multi"``, by default the user's mode in the store) search, add note
    and save fact take a ``person`` and ``memory_find_person`` is added. ``agent_id`` / ``run_id``
    (``acting_for(user, agent_id=...)``, else bound here) tag what the tools write and keep every
    tool to that scope (search, get, archive, forget: another agent's item is an unknown id)."""

    spec_functions = [(name, f"a{name}") for name in TOOLS]

    def __init__(self, store: Any = None, user_id: str | None = None, *, async_store: Any = None,
                 household: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> None:
        self._identity = IdentityResolver("NaviMemoryToolSpec", user_id, agent_id=agent_id, run_id=run_id)
        self._tools = MemoryTools(store, UNBOUND if user_id is None else user_id, async_store=async_store,
                                  household=household)
        self.spec_functions = [(name, f"a{name}") for name in self._tools.specs]
        for name in self._tools.specs:
            sync, run_async = self._tools.functions(name, self._identity.resolve)
            setattr(self, name, sync)
            setattr(self, f"a{name}", run_async)

    def get_metadata_from_fn_name(self, fn_name: str, spec_functions: Any = None) -> Optional[ToolMetadata]:
        schema, description = self._tools.specs[fn_name]
        return ToolMetadata(name=fn_name, description=description, fn_schema=schema)
