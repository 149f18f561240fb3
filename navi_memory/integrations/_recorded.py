"""``StoreCall``: one operation of the store recorded with its arguments, typed by its result; ``Plan``:
a generator of them. ``integrations._caller`` records them (``store_call``) and runs them; the
generated ``StoreCalls`` (``_store_calls.py``) types each operation's call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class StoreCall(Generic[T]):
    """One operation of the store with its arguments (the same names on the blocking and the async
    store); ``T`` is its result type."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def __repr__(self) -> str:  # the arguments may hold a user's text: the names are what a reader needs
        return f"StoreCall({self.method}, {sorted(self.kwargs)})"

    def __iter__(self) -> Generator[StoreCall[Any], Any, T]:
        """``result = yield from call`` in a plan: the runner gets this call and sends back its result."""
        result: T = yield self
        return result


# A plan: yields store calls, gets each one's result back (``yield from``), returns a T; run by
# ``StoreCaller.run`` / ``arun`` as the store runs its operations (an error is thrown into the plan).
Plan = Generator[StoreCall[Any], Any, T]
