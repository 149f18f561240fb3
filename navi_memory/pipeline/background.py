"""Extraction off the caller's path: one worker thread for ``MemoryStore``, tasks for ``AsyncMemoryStore``.

A job has a key (the session); a key already queued or running is not queued again, so a burst
of triggers costs one extraction. A job that fails is logged: the pipeline has already recorded
the failure on the session, which is retried on the next run.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import Any, Callable, Coroutine, Hashable

from ..errors import NaviMemoryError

log = logging.getLogger(__name__)


def _log_failure(key: Hashable, exc: BaseException) -> None:
    if isinstance(exc, NaviMemoryError):
        log.warning("background extraction %s failed: %s", key, exc)
    else:
        log.error("background extraction %s crashed", key, exc_info=(type(exc), exc, exc.__traceback__))


class ThreadJobs:
    """A single daemon worker thread (extractions run one at a time, in order)."""

    def __init__(self, name: str = "navi-memory-extract") -> None:
        self.name = name
        self._queue: queue.Queue[tuple[Hashable, Callable[[], Any]] | None] = queue.Queue()
        self._keys: set[Hashable] = set()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, key: Hashable, job: Callable[[], Any]) -> bool:
        """Queue ``job`` unless ``key`` is already queued or running; True when queued."""
        with self._lock:
            if self._closed or key in self._keys:
                return False
            self._keys.add(key)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
        self._queue.put((key, job))
        return True

    def _work(self) -> None:
        while True:
            entry = self._queue.get()
            if entry is None:
                return
            key, job = entry
            try:
                job()
            except Exception as exc:  # the worker must outlive any one job; the failure is logged
                _log_failure(key, exc)
            finally:
                with self._lock:
                    self._keys.discard(key)
                    self._idle.notify_all()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._keys)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every queued job has finished; False if ``timeout`` ran out first."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._keys, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Finish the queued jobs, then stop the worker."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)


class TaskJobs:
    """asyncio tasks on the running loop, keyed like ``ThreadJobs``."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Task[Any]] = {}
        self._closed = False

    def submit(self, key: Hashable, job: Callable[[], Coroutine[Any, Any, Any]]) -> bool:
        if self._closed or key in self._tasks:
            return False
        task = asyncio.get_running_loop().create_task(job(), name=f"navi-memory-extract {key}")
        self._tasks[key] = task
        task.add_done_callback(lambda t: self._done(key, t))
        return True

    def _done(self, key: Hashable, task: asyncio.Task[Any]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and task.exception() is not None:
            _log_failure(key, task.exception())  # type: ignore[arg-type]

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def wait(self, timeout: float | None = None) -> bool:
        while self._tasks:
            _, pending = await asyncio.wait(list(self._tasks.values()), timeout=timeout)
            if pending:
                return False
        return True

    async def close(self, timeout: float | None = None) -> None:
        self._closed = True
        await self.wait(timeout)
