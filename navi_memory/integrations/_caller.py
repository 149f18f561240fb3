"""How the adapters call a store: blocking or async, whichever the caller and the store allow.
No framework imports, so the REST API's prompt context uses it without the tools' extras.

A call is written ``caller.call(store_call.search(query, user_id=uid))``: ``store_call`` records
the method and its arguments as a ``StoreCall`` (as ``calls.db`` records a backend call), and is
typed as ``MemoryStore``, so a type checker checks the method name and the arguments and
``caller.call`` returns the method's result type. Plans that run on either store (the prompt
context, NaviStore's batches) yield the same ``StoreCall``s.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

if TYPE_CHECKING:
    from ..store import MemoryStore

T = TypeVar("T")


@dataclass(frozen=True)
class StoreCall:
    """One method of the store with its arguments (the same names on the blocking and the async store)."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def __repr__(self) -> str:  # the arguments may hold a user's text: the names are what a reader needs
        return f"StoreCall({self.method}, {sorted(self.kwargs)})"


class _Recorder:
    """``store_call.name(*args, **kwargs)`` -> ``StoreCall("name", args, kwargs)``."""

    def __getattr__(self, method: str) -> Callable[..., StoreCall]:
        if method.startswith("_"):
            raise AttributeError(method)

        def record(*args: Any, **kwargs: Any) -> StoreCall:
            return StoreCall(method, args, kwargs)

        record.__name__ = method
        return record


# Typed as the store for the checker; at run time it records the call for ``StoreCaller``.
store_call = cast("MemoryStore", _Recorder())


def is_async_store(store: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(type(store), "search", None))


def split_stores(store: Any, async_store: Any = None) -> tuple[Any, Any]:
    """(blocking store or None, async store or None) from what the caller passed."""
    if store is not None and is_async_store(store):
        if async_store is not None and async_store is not store:
            raise ValueError("store is an AsyncMemoryStore; pass a MemoryStore as store or only one store")
        return None, store
    if async_store is not None and not is_async_store(async_store):
        raise ValueError("async_store must be an AsyncMemoryStore")
    if store is None and async_store is None:
        raise ValueError("a MemoryStore (store=) or an AsyncMemoryStore (async_store=) is required")
    return store, async_store


class StoreCaller:
    """Calls a store operation through the blocking or the async store, whichever fits the caller."""

    def __init__(self, store: Any, async_store: Any = None) -> None:
        self.sync_store, self.async_store = split_stores(store, async_store)

    def call(self, request: T) -> T:
        """Run a ``store_call`` on the blocking store; its result."""
        if self.sync_store is None:
            raise RuntimeError("only an AsyncMemoryStore was given: use the async API (ainvoke, await ...)")
        call = _checked(request)
        return cast(T, getattr(self.sync_store, call.method)(*call.args, **call.kwargs))

    async def acall(self, request: T) -> T:
        """Run a ``store_call`` on the async store (or the blocking one on a worker thread); its result."""
        call = _checked(request)
        if self.async_store is not None:
            return cast(T, await getattr(self.async_store, call.method)(*call.args, **call.kwargs))
        return cast(T, await asyncio.to_thread(getattr(self.sync_store, call.method), *call.args, **call.kwargs))


def _checked(request: Any) -> StoreCall:
    if not isinstance(request, StoreCall):
        raise TypeError(f"StoreCaller runs store_call requests, not {request!r}")
    return request
