"""How the adapters call a store: blocking or async, whichever the caller and the store allow.
No framework imports, so the REST API's prompt context uses it without the tools' extras."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any


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

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.sync_store is None:
            raise RuntimeError("only an AsyncMemoryStore was given: use the async API (ainvoke, await ...)")
        return getattr(self.sync_store, name)(*args, **kwargs)

    async def acall(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.async_store is not None:
            return await getattr(self.async_store, name)(*args, **kwargs)
        return await asyncio.to_thread(getattr(self.sync_store, name), *args, **kwargs)
