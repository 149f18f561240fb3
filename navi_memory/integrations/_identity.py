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

The scopes ``agent_id`` and ``run_id`` (mem0's agent and run) follow the user's order and rule:
the argument, ``runtime.context.agent_id`` / ``.run_id``, ``acting_for(user, agent_id=, run_id=)``,
``config["configurable"]["agent_id"]`` / ``["run_id"]``, the bound value; two different values
is a ``ValidationError``; none is no scope (None). Adapters tag what they write with them and,
when set, read only what was written with them.
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
SCOPES = ("agent_id", "run_id")
RUNTIME_KEY = "__pregel_runtime"  # where LangGraph keeps the Runtime in a run's config


@dataclasses.dataclass(frozen=True)
class Identity:
    """The user and session a call acts for."""

    user_id: str
    session_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    def scope(self) -> dict[str, str]:
        """The scopes that are set, as store keyword arguments (``agent_id=``, ``run_id=``)."""
        return {name: value for name in SCOPES if (value := getattr(self, name)) is not None}


@contextmanager
def acting_for(user_id: str, *, session_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None) -> Iterator[None]:
    """Every adapter call inside the block acts for ``user_id`` (and ``session_id``, and the
    scopes ``agent_id`` / ``run_id``): for frameworks without a run context (LlamaIndex agents,
    plain code). Safe with threads and asyncio tasks (a ``contextvars`` value: each task sees the
    block it was started in)."""
    token = _ACTING_FOR.set({"user_id": v.user_id(user_id), "session_id": session_id,
                             "agent_id": v.scope_id(agent_id, "agent_id"), "run_id": v.scope_id(run_id, "run_id")})
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

    def __init__(self, owner: str, user_id: Any = None, session_id: str | None = None, *,
                 agent_id: Any = None, run_id: Any = None) -> None:
        self.owner = owner
        self.user_id = None if user_id is None else v.user_id(user_id)
        self.session_id = session_id
        self.agent_id = v.scope_id(agent_id, "agent_id")
        self.run_id = v.scope_id(run_id, "run_id")

    def _sources(self, given: Mapping[str, Any], runtime: Any,
                 config: Mapping[str, Any] | None) -> tuple[dict[str, list[tuple[str, Any]]], list[Any]]:
        """(per field (user_id, agent_id, run_id): where each value came from, the session
        candidates in order of precedence)."""
        run_runtime, run_config = current_run()
        if config is None:  # a ToolRuntime carries its config; LangGraph's Runtime does not
            config = getattr(runtime, "config", None) or run_config
        configurable = (config or {}).get("configurable") or {}
        if runtime is None:
            runtime = configurable.get(RUNTIME_KEY) or run_runtime
        context = getattr(runtime, "context", None)
        acting = _ACTING_FOR.get() or {}
        found: dict[str, list[tuple[str, Any]]] = {}
        for name in ("user_id", *SCOPES):
            keys = CONFIG_USER_KEYS if name == "user_id" else (name,)
            sources = [(f"the {name} argument", given.get(name)), (f"runtime.context.{name}", _field(context, name)),
                       ("acting_for()", acting.get(name))]
            sources += [(f'config["configurable"]["{key}"]', configurable.get(key)) for key in keys]
            sources.append((f"the {name} bound to {self.owner}", getattr(self, name)))
            found[name] = [(where, value) for where, value in sources if value is not None]
        sessions = [_field(context, "session_id"), acting.get("session_id"), configurable.get("session_id"),
                    self.session_id, configurable.get("thread_id")]
        return found, sessions

    def _one(self, name: str, given: list[tuple[str, Any]]) -> str | None:
        def check(value: Any) -> str | None:
            return v.user_id(value) if name == "user_id" else v.scope_id(value, name)

        values = {where: check(value) for where, value in given}
        if len(set(values.values())) > 1:
            kind = "users" if name == "user_id" else f"{name}s"
            raise ValidationError(f"conflicting {kind} for this call to {self.owner}: "
                                  f"{' and '.join(values)} name different ones")
        return next(iter(values.values()), None)

    def resolve(self, *, user_id: Any = None, session_id: str | None = None, agent_id: Any = None,
                run_id: Any = None, runtime: Any = None, config: Mapping[str, Any] | None = None) -> Identity:
        """The identity of one call. ``runtime``/``config`` default to the running LangGraph/LangChain call's."""
        found, sessions = self._sources({"user_id": user_id, "agent_id": agent_id, "run_id": run_id},
                                        runtime, config)
        if not found["user_id"]:
            raise ValidationError(
                f"no user for this call to {self.owner}: pass user_id= to the call, run it with "
                "context=...(user_id=...) or config={'configurable': {'user_id': ...}} (or inside "
                f"navi_memory.integrations.acting_for(user_id)), or bind user_id= when building the {self.owner}")
        uid = self._one("user_id", found["user_id"])
        assert uid is not None
        session = next((s for s in (session_id, *sessions) if s is not None), None)
        return Identity(user_id=uid, session_id=None if session is None else str(session),
                        agent_id=self._one("agent_id", found["agent_id"]), run_id=self._one("run_id", found["run_id"]))

    def user(self, **kwargs: Any) -> str:
        return self.resolve(**kwargs).user_id

    def known_user(self, *, runtime: Any = None, config: Mapping[str, Any] | None = None) -> str | None:
        """The user the running call's context, config or binding names, or None when none does
        (two different ones still raise)."""
        found, _ = self._sources({}, runtime, config)
        return self._one("user_id", found["user_id"])
