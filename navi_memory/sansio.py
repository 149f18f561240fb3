"""Run generator-based operations with blocking or awaited I/O (written once, executed twice).

An operation is a generator that yields requests and receives their results; ``advance`` resumes
it one step. ``install`` copies the public generator methods of a class onto a runner class as
plain (or async) methods with the same name, docstring and signature.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Generator

Op = Generator[Any, Any, Any]


def advance(gen: Op, value: Any, error: BaseException | None = None) -> tuple[bool, Any]:
    """Resume with a result (or throw an error in); (True, return value) once it finishes."""
    try:
        return False, (gen.throw(error) if error is not None else gen.send(value))
    except StopIteration as stop:
        return True, stop.value


def operation(fn: Callable[..., Op]) -> Callable[..., Op]:
    """Mark a generator method as public, to be installed on the runner classes."""
    fn._navi_operation = True  # type: ignore[attr-defined]
    return fn


def install(target: type, source: type, sync: bool) -> None:
    """Give ``target`` a method per marked generator of ``source`` that runs it via ``self._run``."""
    for name, fn in vars(source).items():
        if not getattr(fn, "_navi_operation", False):
            continue
        method = _sync_method(fn) if sync else _async_method(fn)
        functools.update_wrapper(method, fn)
        method.__signature__ = inspect.signature(fn).replace(return_annotation=inspect.Signature.empty)  # type: ignore[attr-defined]
        del method.__wrapped__  # the public method is not a generator
        setattr(target, name, method)


def _sync_method(fn: Callable[..., Op]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._run(fn(self, *args, **kwargs))

    return method


def _async_method(fn: Callable[..., Op]) -> Callable[..., Any]:
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._run(fn(self, *args, **kwargs))

    return method
