"""LangChain adapters: retriever, tools, chat history, a memory Runnable and agent middleware.

One instance of each serves every user: the user of each call comes from the call itself
(an argument, LangGraph's ``runtime.context``, ``config["configurable"]["user_id"]``), else from
the ``user_id`` bound at construction (``navi_memory.integrations._identity`` has the rules).

- ``NaviMemoryRetriever``: a ``BaseRetriever`` over ``store.search``.
- ``NaviMemoryToolkit``: the memory tools (search, add note, save fact, get, archive, forget,
  list themes); the user comes from the run (``ToolRuntime``), never from the model.
- ``NaviChatMessageHistory``: a ``BaseChatMessageHistory`` kept as a session of the store, so
  every message feeds the extraction pipeline (``last_active``, every-N and "remember" triggers).
- ``NaviMemoryRunnable``: ``prompt | NaviMemoryRunnable(store=..., user_id=...) | model`` adds the
  memory messages to a plain LCEL chain.
- ``NaviMemoryMiddleware``: for ``langchain.agents.create_agent``: memory in the prompt, the tools,
  and the conversation recorded after each run.

The prompt layout is ``navi_memory.prompt``'s contract: the summary as a system message right
after the main one, the ``## Relevant Memory`` block as a system message right before the current
user message. Everything here calls store methods only. Needs the ``langchain`` extra.
"""

from __future__ import annotations

import logging
import uuid
from typing import Annotated, Any, Awaitable, Callable, Optional, Sequence, TypeVar

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableSerializable, ensure_config
from langchain_core.tools import BaseTool, BaseToolkit, StructuredTool
from langgraph.prebuilt import ToolRuntime
from langgraph.channels.untracked_value import UntrackedValue
from pydantic import ConfigDict, Field, PrivateAttr, model_validator
from typing_extensions import NotRequired

from .. import prompt
from ..core import validation as v
from ..errors import NotFoundError, ValidationError
from ..models import Message, SearchResult
from ._context import MemoryContext, MemoryContextBuilder, last_user_text
from ._identity import IdentityResolver
from ._caller import StoreCaller, store_call
from ._tools import MULTI_TOOLS, SCOPED, SEARCH_FILTERS, UNBOUND, MemoryTools, argument_error, dumps

__all__ = ["NaviMemoryRetriever", "NaviMemoryToolkit", "NaviChatMessageHistory", "NaviMemoryRunnable",
           "NaviMemoryMiddleware", "result_to_document", "inject_memory", "to_langchain_message"]

log = logging.getLogger("navi_memory.integrations")
M = TypeVar("M", bound=BaseMessage)



def result_to_document(result: SearchResult) -> Document:
    """A search result as a ``Document``: the content as text, the ranking and provenance as metadata."""
    metadata: dict[str, Any] = {
        "id": result.id, "score": result.score, "signals": dict(result.signals), "theme": result.theme,
        "type": result.type, "kind": result.kind,
        "created_at": result.created_at.isoformat() if result.created_at else None,
    }
    for name in ("title", "person", "superseded_by"):  # superseded_by: what it says is past
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
    """Hybrid memory search as a LangChain retriever.

    ``NaviMemoryRetriever(store=store, k=8)`` serves every user: each call names its user
    (``invoke(q, config={"configurable": {"user_id": "u1"}})``, LangGraph's runtime context inside
    a graph, or ``invoke(q, user_id="u1")``); ``user_id="u1"`` binds one (a call naming another
    user is then refused). ``store`` is a ``MemoryStore`` or an
    ``AsyncMemoryStore`` (give both as ``store=`` and ``async_store=`` for native sync and async).
    The search filters (``theme``, ``types``, ``recency_days``, ``status``, ``person``, ...,
    ``min_score``: the relevance floor, by default the store's (``NAVI_MEMORY_MIN_SCORE``; 0 = off;
    ``min_similarity`` is its former name); ``filters``: metadata filters such as
    ``{"topic": "travel", "year": {"$gte": 2024}}``; ``namespace_prefix``; ``timezone``: the user's
    IANA time zone for "yesterday" and dates in queries) are fields, and ``k`` and
    any filter can also be given per call: ``retriever.invoke(q, k=3, filters={...})``.
    ``agent_id`` / ``run_id`` keep the search to what that agent / run wrote; like the user they
    come from the call, the runtime context, ``configurable`` or the fields (conflicts refused).
    With only a ``MemoryStore``, ``ainvoke`` runs the search in a worker thread.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any = Field(default=None, description="MemoryStore (or AsyncMemoryStore)")
    async_store: Any = Field(default=None, description="AsyncMemoryStore for native async calls")
    user_id: Optional[str] = None
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
    min_score: Optional[float] = Field(default=None, ge=0, le=1)
    min_similarity: Optional[float] = Field(default=None, ge=0, le=1)
    filters: Optional[dict[str, Any]] = None
    namespace_prefix: Optional[Sequence[str]] = None
    agent_id: Optional[str] = None
    run_id: Optional[str] = None
    timezone: Optional[str] = None  # the user's IANA zone: the days of "yesterday" (default: the store's)

    _caller: StoreCaller = PrivateAttr()
    _identity: IdentityResolver = PrivateAttr()

    @model_validator(mode="after")
    def _bind(self) -> "NaviMemoryRetriever":
        self._identity = IdentityResolver("NaviMemoryRetriever", self.user_id, agent_id=self.agent_id,
                                          run_id=self.run_id)  # exact or refused
        self._caller = StoreCaller(self.store, self.async_store)
        return self

    def _who(self, config: RunnableConfig, kwargs: dict[str, Any]) -> dict[str, Any]:
        # the scopes travel as one keyword: BaseRetriever.invoke takes ``run_id`` as its callback run's id
        identity = self._identity.resolve(user_id=kwargs.pop("user_id", None), agent_id=kwargs.pop("agent_id", None),
                                          run_id=kwargs.pop("run_id", None), config=config)
        return {"user_id": identity.user_id, "navi_scope": identity.scope()}

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        config = ensure_config(config)  # merged with the enclosing run's (a graph node's) config
        kwargs.update(self._who(config, kwargs))
        return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        config = ensure_config(config)
        kwargs.update(self._who(config, kwargs))
        return await super().ainvoke(input, config, **kwargs)

    def _search_args(self, k: Optional[int], user_id: Optional[str],
                     overrides: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(the user, the other arguments of ``search``)."""
        overrides.pop("verbose", None)
        scope = overrides.pop("navi_scope", None)
        unknown = set(overrides) - set(SEARCH_FILTERS)
        if unknown:
            raise TypeError(f"unknown search argument(s): {', '.join(sorted(unknown))}")
        kwargs = {name: getattr(self, name) for name in SEARCH_FILTERS if name not in SCOPED}
        if user_id is None or scope is None:  # called past invoke (e.g. _get_relevant_documents directly)
            who = self._identity.resolve(user_id=user_id, agent_id=overrides.pop("agent_id", None),
                                         run_id=overrides.pop("run_id", None))
            user_id, scope = who.user_id, who.scope()
        kwargs.update(overrides)
        return user_id, {"limit": self.k if k is None else k, **kwargs, **scope}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: Optional[int] = None, user_id: Optional[str] = None,
                                **filters: Any) -> list[Document]:
        uid, options = self._search_args(k, user_id, filters)
        return [result_to_document(r) for r in self._caller.call(store_call.search(query, user_id=uid, **options))]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: Optional[int] = None, user_id: Optional[str] = None,
                                       **filters: Any) -> list[Document]:
        uid, options = self._search_args(k, user_id, filters)
        found = await self._caller.acall(store_call.search(query, user_id=uid, **options))
        return [result_to_document(r) for r in found]


def _scoped(identity: IdentityResolver, runtime: Any) -> dict[str, Any]:
    found = identity.resolve(runtime=runtime)
    return {"user_id": found.user_id, "agent_id": found.agent_id, "run_id": found.run_id}


def _make_tool(tools: MemoryTools, identity: IdentityResolver, name: str) -> StructuredTool:
    """A memory tool whose user comes from the run: the ``ToolRuntime`` LangGraph injects (its
    context and config), else the config of a direct ``tool.invoke``, else the bound user. The
    model's arguments never carry it (the schema has no such field; LangChain drops extras)."""
    schema, description = tools.specs[name]

    def func(runtime: ToolRuntime = None, **kwargs: Any) -> str:  # type: ignore[assignment]
        return tools.dispatch(name, kwargs, **_scoped(identity, runtime), errors="return")

    async def coroutine(runtime: ToolRuntime = None, **kwargs: Any) -> str:  # type: ignore[assignment]
        return await tools.adispatch(name, kwargs, **_scoped(identity, runtime), errors="return")

    return StructuredTool.from_function(func=func, coroutine=coroutine, name=name, description=description,
                                        args_schema=schema,
                                        handle_validation_error=lambda exc: dumps({"error": argument_error(exc)}))


class NaviMemoryToolkit(BaseToolkit):
    """The memory tools: ``NaviMemoryToolkit(store=store).get_tools()``, for every user of the agent.

    Tools: ``memory_search``, ``memory_add_note``, ``memory_save_fact``, ``memory_get``,
    ``memory_archive``, ``memory_forget``, ``memory_list_themes`` (``include=`` picks a subset);
    in a multi-person household (``household="multi"``; by default the bound user's mode in the
    store, else single) search, add note and save fact take a ``person`` and ``memory_find_person``
    is added. No tool takes a user id: each call acts for the run's user (``create_agent(...,
    context_schema=...)`` with ``context=Ctx(user_id=...)``, or ``config={"configurable":
    {"user_id": ...}}``), or for ``user_id`` bound here. A run without a user, or naming another
    user than the bound one, raises ``ValidationError``. ``agent_id`` / ``run_id`` (the run's, found
    like the user, else bound here) tag the notes and facts written and keep every tool to them
    (search, get, archive, forget: another agent's item is an unknown id). Each tool returns JSON text; the model's
    mistakes come back as ``{"error": ...}`` instead of raising into the agent loop.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any = None
    async_store: Any = None
    user_id: Optional[str] = None
    include: Optional[Sequence[str]] = None
    household: Optional[str] = None
    agent_id: Optional[str] = None
    run_id: Optional[str] = None

    _tools: MemoryTools = PrivateAttr()
    _identity: IdentityResolver = PrivateAttr()

    @model_validator(mode="after")
    def _bind(self) -> "NaviMemoryToolkit":
        unknown = set(self.include or ()) - set(MULTI_TOOLS)
        if unknown:
            raise ValueError(f"unknown memory tool(s): {', '.join(sorted(unknown))}")
        self._identity = IdentityResolver("NaviMemoryToolkit", self.user_id, agent_id=self.agent_id,
                                          run_id=self.run_id)
        # the scopes are resolved per call (bound ones included), so the tools themselves bind none
        self._tools = MemoryTools(self.store, UNBOUND if self.user_id is None else self.user_id,
                                  async_store=self.async_store, household=self.household)
        return self

    def get_tools(self) -> list[BaseTool]:
        names = [n for n in self._tools.specs if self.include is None or n in self.include]
        return [_make_tool(self._tools, self._identity, name) for name in names]


# -- chat history ------------------------------------------------------------------------------

def to_langchain_message(message: Message) -> BaseMessage:
    """A stored message as the LangChain message it came from."""
    if message.role == "user":
        return HumanMessage(content=message.content)
    if message.role == "system":
        return SystemMessage(content=message.content)
    if message.role == "tool":
        return ToolMessage(content=message.content, tool_call_id=message.tool_call_id or "", name=message.name)
    calls = []
    for call in message.tool_calls:
        try:  # stored text: a 20,000-deep array or a 5,000-digit number stays text, not a RecursionError
            args = v.depth(v.parse_json(call.arguments, "tool call arguments"), "tool call arguments") \
                if call.arguments else {}
        except ValidationError:
            args = {"arguments": call.arguments}
        calls.append({"name": call.name, "args": args if isinstance(args, dict) else {"value": args},
                      "id": call.id, "type": "tool_call"})
    return AIMessage(content=message.content, tool_calls=calls)


class NaviChatMessageHistory(BaseChatMessageHistory):
    """A conversation kept in the memory database as the store's session ``session_id``.

    Adding messages is ``store.add_messages``: the session's ``last_active`` moves and the
    pipeline's triggers fire (every N user messages, "remember that ...", stale sessions of the
    user when a new session starts). ``clear()`` keeps what was learned: it extracts the session
    now and continues in a new, empty session (``session_id`` changes); ``store.forget`` deletes
    a user's memory. Works with ``RunnableWithMessageHistory``:
    ``lambda sid: NaviChatMessageHistory(store, sid)`` with the user in each call's
    ``config={"configurable": {"user_id": ...}}`` (or ``user_id="u1"`` bound here). The messages
    added are scoped to the call's ``agent_id`` / ``run_id`` (found like the user, or bound here):
    the turns and notes extracted from them carry that scope.
    """

    def __init__(self, store: Any = None, session_id: str | None = None, user_id: str | None = None, *,
                 async_store: Any = None, background: bool | None = None, triggers: bool = True,
                 agent_id: str | None = None, run_id: str | None = None) -> None:
        # exact or refused (ValidationError, a ValueError), never trimmed
        self._identity = IdentityResolver("NaviChatMessageHistory", user_id, agent_id=agent_id, run_id=run_id)
        self.user_id = self._identity.user_id
        self._caller = StoreCaller(store, async_store)
        self.session_id = session_id or uuid.uuid4().hex
        self.background = background
        self.triggers = triggers

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        try:
            session = self._caller.call(store_call.get_session(self.session_id, user_id=self._identity.user()))
        except NotFoundError:
            return []
        return [to_langchain_message(m) for m in session.messages]

    async def aget_messages(self) -> list[BaseMessage]:
        try:
            session = await self._caller.acall(store_call.get_session(self.session_id, user_id=self._identity.user()))
        except NotFoundError:
            return []
        return [to_langchain_message(m) for m in session.messages]

    def _writer(self) -> dict[str, Any]:
        who = self._identity.resolve()
        return {"user_id": who.user_id, **who.scope(), "background": self.background, "triggers": self.triggers}

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self._caller.call(store_call.add_messages(self.session_id, list(messages), **self._writer()))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await self._caller.acall(store_call.add_messages(self.session_id, list(messages), **self._writer()))

    def clear(self) -> None:
        try:
            self._caller.call(store_call.extract_session(self.session_id, user_id=self._identity.user()))
        except NotFoundError:
            pass
        self.session_id = uuid.uuid4().hex

    async def aclear(self) -> None:
        try:
            await self._caller.acall(store_call.extract_session(self.session_id, user_id=self._identity.user()))
        except NotFoundError:
            pass
        self.session_id = uuid.uuid4().hex


# -- memory in the prompt ----------------------------------------------------------------------

def inject_memory(messages: Sequence[M], context: MemoryContext | None) -> list[M | SystemMessage]:
    """The messages with the memory added: ``context.stable`` as a system message after the leading
    system message(s), ``context.volatile`` as a system message right before the last user message."""
    out: list[M | SystemMessage] = list(messages)
    if context is None:
        return out
    if context.stable:
        lead = next((i for i, m in enumerate(out) if not isinstance(m, SystemMessage)), len(out))
        out.insert(lead, SystemMessage(content=context.stable))
    if context.volatile:
        last_user = max((i for i, m in enumerate(out) if isinstance(m, HumanMessage)), default=len(out))
        out.insert(last_user, SystemMessage(content=context.volatile))
    return out


def _builder(store: Any, async_store: Any, mode: str, k: int,
             search_kwargs: dict[str, Any] | None, min_similarity: float | None, max_tokens: int | None,
             token_counter: Any) -> MemoryContextBuilder:
    return MemoryContextBuilder(StoreCaller(store, async_store), mode=mode, k=k, search_kwargs=search_kwargs,
                                min_similarity=min_similarity, max_tokens=max_tokens, token_counter=token_counter)


def _as_messages(value: Any) -> list[BaseMessage]:
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, str):
        return [HumanMessage(content=value)]
    if isinstance(value, BaseMessage):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(m, BaseMessage) for m in value):
        return list(value)
    raise TypeError(f"NaviMemoryRunnable takes a prompt value, a string or a list of messages, "
                    f"not {type(value).__name__}")


class NaviMemoryRunnable(RunnableSerializable[Any, Any]):
    """Adds the user's memory to a chat prompt: ``prompt | NaviMemoryRunnable(store=s) | model``, the
    user named by each call (``chain.invoke(x, config={"configurable": {"user_id": "u1"}})``, the
    runtime context inside a LangGraph graph, ``invoke(x, user_id=...)``) or bound (``user_id="u1"``).

    Input: a prompt value, a list of messages or a string; output: the list of messages with the
    summary after the system message and the relevant memories before the last user message
    (``mode="injection"``, default), or the tool guidance with theme hints (``mode="tools"``).
    With the feature flag off or the kill switch on, the input passes through unchanged.
    ``agent_id`` / ``run_id`` (per call as the user is, or bound) keep the search to that scope.
    ``min_similarity``: memories with less evidence of relevance are left out (``search``'s
    floor; None: the store's ``NAVI_MEMORY_MIN_SIMILARITY``, 0: off). Of the ``k`` results, those
    that fit in ``max_tokens`` are injected (None: the store's ``NAVI_MEMORY_INJECTION_TOKENS``),
    counted by ``token_counter`` (e.g. ``model.get_num_tokens``; default: an approximate count).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any = None
    async_store: Any = None
    user_id: Optional[str] = None
    mode: str = "injection"
    k: int = Field(default=8, ge=1, le=50)
    search_kwargs: Optional[dict[str, Any]] = None
    min_similarity: Optional[float] = Field(default=None, ge=0, le=1)
    max_tokens: Optional[int] = Field(default=None, ge=1)
    token_counter: Optional[Callable[[str], int]] = None
    agent_id: Optional[str] = None
    run_id: Optional[str] = None

    _builder: MemoryContextBuilder = PrivateAttr()
    _identity: IdentityResolver = PrivateAttr()

    @model_validator(mode="after")
    def _bind(self) -> "NaviMemoryRunnable":
        self._identity = IdentityResolver("NaviMemoryRunnable", self.user_id, agent_id=self.agent_id,
                                          run_id=self.run_id)
        self._builder = _builder(self.store, self.async_store, self.mode, self.k, self.search_kwargs,
                                 self.min_similarity, self.max_tokens, self.token_counter)
        return self

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        config = ensure_config(config)
        who = self._identity.resolve(user_id=kwargs.get("user_id"), agent_id=kwargs.get("agent_id"),
                                     run_id=kwargs.get("run_id"), config=config)

        def run(value: Any) -> Any:
            messages = _as_messages(value)
            context = self._builder.build(*last_user_text(messages), user_id=who.user_id, scope=who.scope())
            return value if context is None else inject_memory(messages, context)
        return self._call_with_config(run, input, config, run_type="prompt")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        config = ensure_config(config)
        who = self._identity.resolve(user_id=kwargs.get("user_id"), agent_id=kwargs.get("agent_id"),
                                     run_id=kwargs.get("run_id"), config=config)

        async def run(value: Any) -> Any:
            messages = _as_messages(value)
            context = await self._builder.abuild(*last_user_text(messages), user_id=who.user_id, scope=who.scope())
            return value if context is None else inject_memory(messages, context)
        return await self._acall_with_config(run, input, config, run_type="prompt")


# -- agent middleware ----------------------------------------------------------------------------

class NaviMemoryState(AgentState):
    """The middleware's per-run state: the memory found when the run started (not checkpointed)."""

    navi_memory: NotRequired[Annotated[dict[str, Any], UntrackedValue, PrivateStateAttr]]


class NaviMemoryMiddleware(AgentMiddleware):
    """Long-term memory for ``create_agent(model, tools, middleware=[NaviMemoryMiddleware(store=s)])``.

    One compiled agent serves every user: each run acts for the user of its runtime context
    (``create_agent(..., context_schema=Ctx)`` and ``agent.invoke(..., context=Ctx(user_id="u1"))``)
    or config (``config={"configurable": {"user_id": "u1"}}``), else for ``user_id`` bound here;
    a run without a user, or naming another than the bound one, raises ``ValidationError``.
    ``agent_id`` / ``run_id`` are found the same way (``Ctx(user_id=..., agent_id=...)``, configurable,
    bound here): the search, the tools and the recorded conversation keep to that scope.

    Per agent run: once, before the first model call, the summary and the top ``k`` (8) memories
    for the user's message are fetched (no search for a greeting opening a conversation); every
    model call of the run gets the summary as a system message right after the agent's system
    prompt (the stable part) and the memories as a ``## Relevant Memory`` system message right
    before the current user message (the volatile part). ``mode="tools"`` puts only the tool
    guidance and theme hints there. The memory tools are registered (``tools=False``: not).
    After the run the run's messages are added to the session (the run's ``session_id`` from its
    context or config, else ``session_id`` given here, else the thread id, else one id per
    middleware), which fires the pipeline's triggers (every N user
    messages, "remember that ..."). A memory failure never fails the run: the prompt then says
    memory tools are unavailable. With the flag off or the kill switch on the middleware does
    nothing: the model gets exactly the request it would get without it (no memory tools either).
    Memories below the relevance floor ``min_similarity`` (None: the store's setting, 0: off) are
    not injected, so an unrelated message gets no ``## Relevant Memory`` block; the others are
    injected as far as ``max_tokens`` allows (None: ``NAVI_MEMORY_INJECTION_TOKENS``), counted by
    ``token_counter`` (e.g. ``model.get_num_tokens``; default: an approximate count).
    """

    state_schema = NaviMemoryState

    def __init__(self, store: Any = None, user_id: str | None = None, *, async_store: Any = None,
                 session_id: str | None = None, mode: str = "injection", k: int = 8, tools: bool = True,
                 record: bool = True, search_kwargs: dict[str, Any] | None = None,
                 min_similarity: float | None = None, max_tokens: int | None = None,
                 token_counter: Callable[[str], int] | None = None, agent_id: str | None = None,
                 run_id: str | None = None) -> None:
        super().__init__()
        self._identity = IdentityResolver("NaviMemoryMiddleware", user_id, session_id, agent_id=agent_id,
                                          run_id=run_id)
        self._builder = _builder(store, async_store, mode, k, search_kwargs, min_similarity, max_tokens,
                                 token_counter)
        self._caller = self._builder.caller
        self.user_id = self._identity.user_id
        self.session_id = session_id
        self._fallback_session = uuid.uuid4().hex
        self.record = record
        self.tools = NaviMemoryToolkit(store=store, async_store=async_store, user_id=user_id, agent_id=agent_id,
                                       run_id=run_id).get_tools() if tools else []
        self._tool_names = {t.name for t in self.tools}

    # the run's start: fetch memory once
    @staticmethod
    def _start(state: Any) -> int:
        messages = state["messages"]
        return max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=len(messages))

    def _run_identity(self, state: Any, runtime: Any) -> dict[str, Any]:
        identity = self._identity.resolve(runtime=runtime)
        return {"user_id": identity.user_id, "session_id": identity.session_id or self._fallback_session,
                "scope": identity.scope(), "start": self._start(state)}

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if not prompt.injection_enabled():
            return {"navi_memory": {"off": True}}
        run = self._run_identity(state, runtime)
        run["context"] = self._builder.build(*last_user_text(state["messages"]), user_id=run["user_id"],
                                             scope=run["scope"])
        return {"navi_memory": run}

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if not prompt.injection_enabled():
            return {"navi_memory": {"off": True}}
        run = self._run_identity(state, runtime)
        run["context"] = await self._builder.abuild(*last_user_text(state["messages"]), user_id=run["user_id"],
                                                    scope=run["scope"])
        return {"navi_memory": run}

    # every model call: the memory messages
    def _request(self, request: ModelRequest) -> ModelRequest:
        run = _run_state(request.state)
        if run.get("off"):
            return request.override(tools=[t for t in request.tools if getattr(t, "name", None)
                                            not in self._tool_names])
        return request.override(messages=inject_memory(request.messages, run.get("context")))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        return handler(self._request(request))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        return await handler(self._request(request))

    # after the run: record it (the pipeline's triggers decide about extraction)
    def _recording(self, state: Any) -> tuple[str, list[BaseMessage], str, dict[str, Any]] | None:
        """(session, the run's messages, user, scope), as resolved when the run started."""
        run = state.get("navi_memory") or {}
        if not self.record or run.get("off") or "start" not in run:
            return None
        messages = [m for m in state["messages"][run["start"]:] if isinstance(m, BaseMessage)]
        return run["session_id"], messages, run["user_id"], run.get("scope", {})

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        todo = self._recording(state)
        if todo and todo[1]:
            try:
                self._caller.call(store_call.add_messages(todo[0], todo[1], user_id=todo[2], **todo[3]))
            except Exception as exc:
                log.warning("the conversation could not be recorded: %s", exc)
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        todo = self._recording(state)
        if todo and todo[1]:
            try:
                await self._caller.acall(store_call.add_messages(todo[0], todo[1], user_id=todo[2], **todo[3]))
            except Exception as exc:
                log.warning("the conversation could not be recorded: %s", exc)
        return None


def _run_state(state: Any) -> dict[str, Any]:
    """What ``before_agent`` kept in the agent state for the run (``navi_memory``; empty before it)."""
    run: dict[str, Any] = state.get("navi_memory") or {}
    return run
