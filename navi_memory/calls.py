"""The I/O an operation asks its runner for: each ``yield`` in an operation is one request.

- ``db.<method>(name=value, ...)``: a backend method of ``backends.base.Backend``, recorded as a
  ``BackendCall``. ``db`` is typed as that Protocol, so mypy checks the method name and the
  arguments of every call; at run time it only records them (keywords only, so a reordered
  signature cannot silently swap two values).
- ``at_once(db.a(...), db.b(...))``: independent backend calls the runner may run concurrently.
- ``EmbedQuery`` / ``EmbedDocuments``: the store's embedder (or, naming its model, the previous one
  while the store moves to a new model); ``Chat``: its chat model; ``Rerank``: its reranking model;
  ``Spawn``: run a public operation of the store in the background; ``Pause``: wait (a throttle).

The runners (``store.MemoryStore`` / ``AsyncMemoryStore``) execute them; nothing else knows how.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generator, Union, cast

if TYPE_CHECKING:
    from .backends.base import Backend


@dataclass(frozen=True)
class BackendCall:
    """One backend method with its keyword arguments."""

    method: str
    kwargs: dict[str, Any]

    def __repr__(self) -> str:  # the arguments may be whole rows: the name is what a reader needs
        return f"BackendCall({self.method}, {sorted(self.kwargs)})"


@dataclass(frozen=True)
class AtOnce:
    """Independent backend calls; the operation receives ``[(value, error), ...]`` in order, where
    ``error`` is the NaviMemoryError a call raised, else None."""

    calls: tuple[BackendCall, ...]


@dataclass(frozen=True)
class EmbedQuery:
    """The embedder's vector of one search query (``model``: the embedder of that model; None: the store's)."""

    text: str
    model: str | None = None


@dataclass(frozen=True)
class EmbedDocuments:
    """The embedder's vectors of stored texts, in order (``model`` as ``EmbedQuery``'s)."""

    texts: list[str]
    model: str | None = None


@dataclass(frozen=True)
class Pause:
    """Wait ``seconds`` (a background job keeping to its rate)."""

    seconds: float


@dataclass(frozen=True)
class Rerank:
    """The reranking model's scores of texts for a query, in order."""

    query: str
    texts: list[str]


@dataclass(frozen=True)
class Chat:
    """One chat-model request (``pipeline.llm.ChatClient.invoke``): an ``LLMReply`` comes back."""

    purpose: str
    messages: list[Any]
    schema: Any = None


@dataclass(frozen=True)
class Spawn:
    """Run the store's public operation ``operation`` in the background (at most one queued per
    operation, user and arguments); the operation receives whether it was queued."""

    operation: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.operation, self.kwargs.get("user_id"), *self.args)


Request = Union[BackendCall, AtOnce, EmbedQuery, EmbedDocuments, Rerank, Chat, Spawn, Pause]


class _Recorder:
    """``db.name(**kwargs)`` -> ``BackendCall("name", kwargs)``."""

    def __getattr__(self, method: str) -> Callable[..., BackendCall]:
        if method.startswith("_"):
            raise AttributeError(method)

        def record(**kwargs: Any) -> BackendCall:
            return BackendCall(method, kwargs)

        record.__name__ = method
        return record


# Typed as the Protocol for the checker (names and arguments of every call are checked against
# ``Backend``); what it returns at run time is the ``BackendCall`` the runner executes.
db = cast("Backend", _Recorder())


def at_once(*calls: Any) -> AtOnce:
    """Independent calls that may run concurrently (each backend call takes its own connection).
    The blocking runner keeps one call on the calling thread, the first of those the backend does
    not send together with others (``can_share``): put the longest call first, so the operation
    waits for it with no thread hand-off."""
    for call in calls:
        if not isinstance(call, BackendCall):
            raise TypeError(f"at_once takes backend calls, not {call!r}")
    return AtOnce(calls)


def together(*calls: Any) -> Generator[Any, Any, list[Any]]:
    """``yield from`` it: each call's result (None for a call that is None), several at once;
    the first error among them is raised."""
    live = [c for c in calls if c is not None]
    if len(live) == 1:
        values = [(yield live[0])]
    else:
        values = []
        for value, error in ((yield at_once(*live)) if live else []):
            if error is not None:
                raise error
            values.append(value)
    found = iter(values)
    return [None if c is None else next(found) for c in calls]
