"""Who a call acts for, resolved on every call the same way in every adapter.

One agent (a compiled LangGraph/LangChain graph, a LlamaIndex agent) serves many users, so an
adapter cannot fix the user when it is built. Each call finds it, in this order:

1. an explicit argument of the call (``retriever.invoke(q, user_id=...)``);
2. the run's context: LangGraph's ``runtime.context`` (``context=Ctx(user_id=...)``; dataclass,
   TypedDict or pydantic) or ``with acting_for(user_id=...)`` around any framework's call;
3. the run's config: ``config["configurable"]["user_id"]`` (also ``langgraph_user_id`` and
   ``langgraph_auth_user_id``, as LangGraph Platform sets them);
4. the value bound when the adapter was built (``user_id=`` at construction).

Every source that names a user must name the same one: two different users (say the runtime
context and the bound value) is a ``ValidationError``, never a silent choice. None at all is a
``ValidationError`` naming the ways to give one. The session follows the same order with the
LangGraph ``thread_id`` after the bound value; it is not an access boundary, so the first found wins.
"""

from __future__ import annotations

import contextvars
import dataclasses
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from ..core import validation as v
from ..errors import ValidationError

__all__ = ["Identity", "IdentityResolver", "acting_for", "current_run"]

_ACTING_FOR: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("navi_memory_acting_for",
                                                                                    default=None)
CONFIG_USER_KEYS = ("user_id", "langgraph_user_id", "langgraph_auth_user_id")
RUNTIME_KEY = "__pregel_runtime"  # where LangGraph keeps the Runtime in a run's config


@dataclasses.dataclass(frozen=True)
class Identity:
    """The user and session a call acts for."""

    user_id: str
    session_id: str | None = None


@contextmanager
def acting_for(user_id: str, *, session_id: str | None = None) -> Iterator[None]:
    """Every adapter call inside the block acts for ``user_id`` (and ``session_id``): for
    frameworks without a run context (LlamaIndex agents, plain code). Safe with threads and
    asyncio tasks (a ``contextvars`` value: each task sees the block it was started in)."""
    token = _ACTING_FOR.set({"user_id": v.user_id(user_id), "session_id": session_id})
    try:
        yield
    finally:
        _ACTING_FOR.reset(token)


def current_run() -> tuple[Any, dict[str, Any] | None]:
    """(LangGraph runtime or None, the LangChain config of the running call or None)."""
    try:
        from langchain_core.runnables.config import var_child_runnable_config
    except ImportError:  # no LangChain installed: no LangChain run either
        return None, None
    config = var_child_runnable_config.get()
    if not config:
        return None, None
    return (config.get("configurable") or {}).get(RUNTIME_KEY), dict(config)


def _field(source: Any, name: str) -> Any:
    """A field of a runtime context: attribute (dataclass, pydantic) or key (TypedDict, dict)."""
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


class IdentityResolver:
    """Resolves the identity of each call; ``owner`` names the adapter in error messages."""

    def __init__(self, owner: str, user_id: Any = None, session_id: str | None = None) -> None:
        self.owner = owner
        self.user_id = None if user_id is None else v.user_id(user_id)
        self.session_id = session_id

    def _sources(self, user_id: Any, runtime: Any,
                 config: Mapping[str, Any] | None) -> tuple[list[tuple[str, Any]], list[Any]]:
        """(where each user id came from, the session candidates in order of precedence)."""
        run_runtime, run_config = current_run()
        if config is None:  # a ToolRuntime carries its config; LangGraph's Runtime does not
            config = getattr(runtime, "config", None) or run_config
        configurable = (config or {}).get("configurable") or {}
        if runtime is None:
            runtime = configurable.get(RUNTIME_KEY) or run_runtime
        context = getattr(runtime, "context", None)
        acting = _ACTING_FOR.get() or {}
        found = [("the user_id argument", user_id), ("runtime.context.user_id", _field(context, "user_id")),
                 ("acting_for()", acting.get("user_id"))]
        found += [(f'config["configurable"]["{key}"]', configurable.get(key)) for key in CONFIG_USER_KEYS]
        found.append((f"the user_id bound to {self.owner}", self.user_id))
        sessions = [_field(context, "session_id"), acting.get("session_id"), configurable.get("session_id"),
                    self.session_id, configurable.get("thread_id")]
        return [(where, value) for where, value in found if value is not None], sessions

    def resolve(self, *, user_id: Any = None, session_id: str | None = None, runtime: Any = None,
                config: Mapping[str, Any] | None = None) -> Identity:
        """The identity of one call. ``runtime``/``config`` default to the running LangGraph/LangChain call's."""
        given, sessions = self._sources(user_id, runtime, config)
        if not given:
            raise ValidationError(
                f"no user for this call to {self.owner}: pass user_id= to the call, run it with "
                "context=...(user_id=...) or config={'configurable': {'user_id': ...}} (or inside "
                f"navi_memory.integrations.acting_for(user_id)), or bind user_id= when building the {self.owner}")
        users = {where: v.user_id(value) for where, value in given}
        if len(set(users.values())) > 1:
            raise ValidationError(f"conflicting users for this call to {self.owner}: "
                                  f"{' and '.join(users)} name different users")
        session = next((s for s in (session_id, *sessions) if s is not None), None)
        return Identity(user_id=next(iter(users.values())), session_id=None if session is None else str(session))

    def user(self, **kwargs: Any) -> str:
        return self.resolve(**kwargs).user_id
