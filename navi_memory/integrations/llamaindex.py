"""LlamaIndex adapters: a retriever, a memory block for ``Memory``, and the memory tools.

- ``NaviMemoryRetriever``: a ``BaseRetriever`` over ``store.search`` returning ``NodeWithScore``.
- ``NaviMemoryBlock``: a ``BaseMemoryBlock[str]`` rendering the user's summary and relevant
  memories (or, ``mode="tools"``, the tool guidance) for ``Memory.from_defaults(memory_blocks=[...])``,
  and recording the conversation into a store session so the extraction pipeline runs on it.
- ``NaviMemoryToolSpec``: the memory tools (search, add note, save fact, get, archive, forget,
  list themes) for ``FunctionAgent(tools=spec.to_tool_list())``, the user bound at construction.

Everything here calls store methods only. Needs the ``llamaindex`` extra (``llama-index-core``).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Callable, List, Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import ToolMetadata
from llama_index.core.tools.tool_spec.base import BaseToolSpec
from pydantic import Field, PrivateAttr, model_validator

from .. import prompt
from ..core import validation as v
from ..models import SearchResult
from ._context import MemoryContextBuilder, last_user_text
from ._tools import TOOLS, MemoryTools, StoreCaller

__all__ = ["NaviMemoryRetriever", "NaviMemoryBlock", "NaviMemoryToolSpec", "result_to_node"]

log = logging.getLogger("navi_memory.integrations")

HIDDEN_FROM_MODEL = ["id", "score", "signals", "kind", "fact"]
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
    node = TextNode(id_=str(result.id), text=result.content, metadata=metadata,
                    excluded_llm_metadata_keys=list(HIDDEN_FROM_MODEL),
                    excluded_embed_metadata_keys=list(HIDDEN_FROM_MODEL))
    return NodeWithScore(node=node, score=result.score)


class NaviMemoryRetriever(BaseRetriever):
    """``NaviMemoryRetriever(store, user_id="u1", k=8, theme=..., ...)``: hybrid memory search for one
    user. ``store`` is a ``MemoryStore`` or an ``AsyncMemoryStore`` (``aretrieve`` is native with
    the latter; with only a ``MemoryStore`` it runs in a worker thread). Extra keywords are search
    filters (``theme``, ``types``, ``recency_days``, ``status``, ``person``, ..., ``min_similarity``)."""

    def __init__(self, store: Any = None, user_id: str | None = None, *, async_store: Any = None, k: int = 8,
                 **search_kwargs: Any) -> None:
        uid = v.user_id(user_id)  # exact or refused (ValidationError, a ValueError), never trimmed
        super().__init__()
        self._caller = StoreCaller(store, async_store)
        self.user_id, self.k, self.search_kwargs = uid, k, search_kwargs

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        results = self._caller.call("search", query_bundle.query_str, user_id=self.user_id, limit=self.k,
                                    **self.search_kwargs)
        return [result_to_node(r) for r in results]

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        results = await self._caller.acall("search", query_bundle.query_str, user_id=self.user_id, limit=self.k,
                                           **self.search_kwargs)
        return [result_to_node(r) for r in results]


def to_store_message(message: ChatMessage) -> dict[str, Any]:
    """A LlamaIndex chat message in the OpenAI-style form the store takes."""
    role = getattr(message.role, "value", message.role)
    extra = message.additional_kwargs or {}
    calls = [{"id": b.tool_call_id, "name": b.tool_name, "args": b.tool_kwargs}
             for b in message.blocks if isinstance(b, ToolCallBlock)]
    calls += list(extra.get("tool_calls") or [])
    return {"role": ASSISTANT_ROLES.get(role, role), "content": message.content or "", "tool_calls": calls,
            "tool_call_id": extra.get("tool_call_id"), "name": extra.get("name")}


def _fingerprint(message: ChatMessage) -> tuple:
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
    """

    name: str = "navi_memory"
    description: Optional[str] = "Long-term memory of the user (navi-memory)."
    store: Any = None
    async_store: Any = None
    user_id: str
    session_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    mode: str = "injection"
    k: int = Field(default=8, ge=1, le=50)
    record: bool = True
    search_kwargs: Optional[dict[str, Any]] = None
    min_similarity: Optional[float] = Field(default=None, ge=0, le=1)
    max_tokens: Optional[int] = Field(default=None, ge=1)
    token_counter: Optional[Callable[[str], int]] = None

    _builder: MemoryContextBuilder = PrivateAttr()
    _seen: list = PrivateAttr(default_factory=list)
    _cache: Optional[tuple] = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _bind(self) -> "NaviMemoryBlock":
        self._builder = MemoryContextBuilder(StoreCaller(self.store, self.async_store), self.user_id, mode=self.mode,
                                             k=self.k, search_kwargs=self.search_kwargs,
                                             min_similarity=self.min_similarity, max_tokens=self.max_tokens,
                                             token_counter=self.token_counter)
        return self

    async def _aget(self, messages: Optional[List[ChatMessage]] = None, **block_kwargs: Any) -> str:
        if not prompt.injection_enabled():
            return ""
        messages = list(messages or [])
        if len(messages) > 1 and _fingerprint(messages[-1]) == _fingerprint(messages[-2]) \
                and _fingerprint(messages[-1])[0] == "user":
            messages.pop()  # Memory.aget(input=...) appends the user message the history already holds
        key = last_user_text(messages)
        if self._cache is None or self._cache[0] != key:
            context = await self._builder.abuild(*key)
            text = "" if context is None else "\n\n".join(t for t in (context.stable, context.volatile) if t)
            self._cache = (key, text)
        await self._record(messages)  # after the search: this turn's extraction cannot race it
        return self._cache[1]

    async def _aput(self, messages: List[ChatMessage]) -> None:
        await self._record(messages, ejected=True)

    async def arecord_memory(self, memory: Any) -> None:
        """Record what ``memory`` holds now (e.g. the answer that ended the agent's run)."""
        await self._record(await memory.aget_all())

    async def _record(self, messages: List[ChatMessage], ejected: bool = False) -> None:
        if not self.record or not prompt.injection_enabled():
            return
        if ejected:  # leaving the window: record what was never shown to aget
            seen = set(self._seen)
            new = [m for m in messages if _fingerprint(m) not in seen]
        else:
            prints = [_fingerprint(m) for m in messages]
            overlap = next((n for n in range(min(len(prints), len(self._seen)), 0, -1)
                            if self._seen[-n:] == prints[:n]), 0)
            new = messages[overlap:]
            self._seen = prints
        rows = [to_store_message(m) for m in new]
        if not rows:
            return
        try:
            await self._builder.caller.acall("add_messages", self.session_id, rows, user_id=self.user_id)
        except Exception as exc:
            log.warning("the conversation could not be recorded: %s", exc)


class NaviMemoryToolSpec(BaseToolSpec):
    """The memory tools for one user: ``NaviMemoryToolSpec(store, user_id="u1").to_tool_list()``.

    Tools: ``memory_search``, ``memory_add_note``, ``memory_save_fact``, ``memory_get``,
    ``memory_archive``, ``memory_forget``, ``memory_list_themes``; each returns JSON text and has
    a blocking and an async form. The user id is not an argument of any tool. In a multi-person
    household (``household="multi"``, by default the user's mode in the store) search, add note
    and save fact take a ``person`` and ``memory_find_person`` is added."""

    spec_functions = [(name, f"a{name}") for name in TOOLS]

    def __init__(self, store: Any = None, user_id: str | None = None, *, async_store: Any = None,
                 household: str | None = None) -> None:
        self._tools = MemoryTools(store, user_id, async_store=async_store, household=household)
        self.spec_functions = [(name, f"a{name}") for name in self._tools.specs]
        for name in self._tools.specs:
            sync, run_async = self._tools.functions(name)
            setattr(self, name, sync)
            setattr(self, f"a{name}", run_async)

    def get_metadata_from_fn_name(self, fn_name: str, spec_functions: Any = None) -> Optional[ToolMetadata]:
        schema, description = self._tools.specs[fn_name]
        return ToolMetadata(name=fn_name, description=description, fn_schema=schema)
