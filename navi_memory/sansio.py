"""Run generator-based operations with blocking or awaited I/O (written once, executed twice).

An operation is a generator that yields requests and receives their results; ``advance`` resumes
it one step. ``install`` copies the generator methods of a class onto a runner class as plain (or
async) methods with the same name, docstring and signature (used by the PostgreSQL backend); the
runner's ``_run`` gets a factory of the generator, so it can run a call again from the start, and
whether the operation is marked ``reads``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Generator, TypeVar

T = TypeVar("T")
# An operation: yields its I/O requests, receives their results, returns a T.
Op = Generator[Any, Any, T]


def advance(gen: Op[Any], value: Any, error: BaseException | None = None) -> tuple[bool, Any]:
    """Resume with a result (or throw an error in); (True, return value) once it finishes."""
    try:
        return False, (gen.throw(error) if error is not None else gen.send(value))
    except StopIteration as stop:
        return True, stop.value


F = TypeVar("F", bound=Callable[..., Op[Any]])


def operation(fn: F) -> F:
    """Mark a generator method as a public operation of the store (scripts/gen_store_api.py
    writes a typed method per marked generator on ``MemoryStore`` and ``AsyncMemoryStore``)."""
    fn._navi_operation = True  # type: ignore[attr-defined]
    return fn


def reads(fn: F) -> F:
    """Mark an operation that only reads and needs no snapshot shared by its statements: a runner
    may run each statement on its own (PostgreSQL: autocommit, no BEGIN/COMMIT round trips)."""
    fn._navi_reads = True  # type: ignore[attr-defined]
    return fn


def install(target: type, source: type, sync: bool) -> None:
    """Give ``target`` a method per marked generator of ``source`` that runs it via ``self._run``."""
    for name, fn in vars(source).items():
        if not getattr(fn, "_navi_operation", False):
            continue
        method = _sync_method(fn) if sync else _async_method(fn)
        functools.update_wrapper(method, fn)
        method.__signature__ = inspect.signature(fn).replace(return_annotation=inspect.Signature.empty)  # type: ignore[attr-defined]
        del method.__wrapped__  # type: ignore[attr-defined]  # the public method is not a generator
        setattr(target, name, method)


def _sync_method(fn: Callable[..., Op[Any]]) -> Callable[..., Any]:
    only_reads = getattr(fn, "_navi_reads", False)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._run(lambda: fn(self, *args, **kwargs), only_reads)  # a factory: the runner may run it again

    return method


def _async_method(fn: Callable[..., Op[Any]]) -> Callable[..., Any]:
    only_reads = getattr(fn, "_navi_reads", False)

    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._run(lambda: fn(self, *args, **kwargs), only_reads)

    return method
