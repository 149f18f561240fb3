"""Concurrent calls of one event loop run together: ``Merger``.

A ``gather`` of thousands of ``aget``/``aput`` calls would otherwise be thousands of store
calls, each waiting for a pooled connection. Each caller submits its list of work; a few lanes
take what has queued up since and run it as one list (so the runner can share reads and collapse
writes), then hand each caller its own results. When a combined run fails, each caller's list runs
again alone, so an error reaches only the caller whose work raised it (the runs must be safe to
repeat: NaviStore's reads are, and its writes put or delete whole values).
"""

from __future__ import annotations

import asyncio
import collections
from typing import Awaitable, Callable, Deque, Generic, TypeVar

W = TypeVar("W")
R = TypeVar("R")


class Merger(Generic[W, R]):
    """Runs the work lists submitted on one loop together, ``lanes`` combined runs at a time,
    each of up to ``most`` pieces of work (a list longer than that runs alone)."""

    def __init__(self, run: Callable[[list[W]], Awaitable[list[R]]], *, lanes: int, most: int) -> None:
        self._run = run
        self.lanes = lanes
        self.most = most
        self._queue: Deque[tuple[list[W], asyncio.Future[list[R]]]] = collections.deque()
        self._busy = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, work: list[W]) -> list[R]:
        """``work``'s results, in order, once a lane has run it (with whatever queued beside it)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[R]] = loop.create_future()
        self._queue.append((work, done))
        if self._busy < self.lanes:
            self._busy += 1
            task = loop.create_task(self._lane())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await done

    def _take(self) -> list[tuple[list[W], asyncio.Future[list[R]]]]:
        taken: list[tuple[list[W], asyncio.Future[list[R]]]] = []
        size = 0
        while self._queue and (not taken or size + len(self._queue[0][0]) <= self.most):
            work, done = self._queue.popleft()
            if not done.done():  # a cancelled caller's work is not run
                taken.append((work, done))
                size += len(work)
        return taken

    async def _lane(self) -> None:
        taken: list[tuple[list[W], asyncio.Future[list[R]]]] = []
        try:
            while self._queue:
                taken = self._take()
                if taken:
                    await self._together(taken)
        finally:
            self._busy -= 1
            for _, done in taken:  # the lane itself was cancelled (the loop is closing)
                if not done.done():
                    done.cancel()

    async def _together(self, taken: list[tuple[list[W], asyncio.Future[list[R]]]]) -> None:
        try:
            results = await self._run([piece for work, _ in taken for piece in work])
        except Exception as exc:  # noqa: BLE001 - handed to the callers, each alone when several
            if len(taken) == 1:
                _settle(taken[0][1], error=exc)
                return
            for work, done in taken:
                try:
                    _settle(done, await self._run(work))
                except Exception as alone:  # noqa: BLE001 - this caller's own error
                    _settle(done, error=alone)
            return
        start = 0
        for work, done in taken:
            _settle(done, results[start:start + len(work)])
            start += len(work)


def _settle(done: asyncio.Future[list[R]], results: list[R] | None = None,
            error: BaseException | None = None) -> None:
    if done.done():  # its caller stopped waiting (cancelled)
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(results if results is not None else [])
