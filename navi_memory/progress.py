"""Progress of long CLI work on stderr: a tqdm bar with rate and ETA on a terminal, a few quiet
lines otherwise (a pipe or a log file gets one line every 10 seconds and a final one).

``NAVI_MEMORY_PROGRESS`` overrides the detection: ``bar``, ``lines`` or ``off``. Without tqdm
(the ``cli`` extra) a terminal gets the lines too. Operations never print: they take a
``progress(done, total)`` callback, and the CLI passes a ``Progress``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

MODE_ENV = "NAVI_MEMORY_PROGRESS"
LINE_EVERY = 10.0  # seconds between two lines when not on a terminal


def _mode(stream: TextIO) -> str:
    wanted = os.environ.get(MODE_ENV, "").strip().lower()
    if wanted in ("bar", "lines", "off"):
        return wanted
    try:
        return "bar" if stream.isatty() else "lines"
    except ValueError:  # a closed stream
        return "off"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """``progress(done, total=None)`` as often as convenient; ``close()`` once at the end (or use
    it as a context manager). ``unit`` names what is counted (``items``, ``records``);
    ``enabled=False`` shows nothing (the work's own output goes to the same terminal)."""

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None,
                 unit: str = "items", enabled: bool = True) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream or sys.stderr
        self.mode = _mode(self.stream) if enabled else "off"
        self._bar: Any = None  # the tqdm bar, drawn from the first report on (no work: no bar)
        if self.mode == "bar":
            try:
                import tqdm  # noqa: F401
            except ImportError:
                self.mode = "lines"
        self._started = time.monotonic()
        self._last_line = self._started
        self._done = 0
        self._written_at = 0  # nothing reported yet: nothing to say
        self._closed = False

    def __call__(self, done: int, total: int | None = None) -> None:
        if total is not None and total != self.total:
            self.total = total
            if self._bar is not None:
                self._bar.total = total
                self._bar.refresh()
        if self.mode == "bar":
            if self._bar is None:
                from tqdm import tqdm

                self._bar = tqdm(total=self.total, desc=self.label, unit=f" {self.unit}", file=self.stream,
                                 dynamic_ncols=True, mininterval=0.1, leave=True)
            self._bar.update(done - self._done)
        self._done = done
        if self.mode == "lines" and time.monotonic() - self._last_line >= LINE_EVERY:
            self._line()

    def line_text(self) -> str:
        """The quiet line: count, rate and (when the total is known and work remains) the ETA."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = self._done / elapsed
        count = f"{self._done}/{self.total}" if self.total else f"{self._done}"
        text = f"{self.label}: {count} {self.unit}, {rate:.1f}/s, {_duration(elapsed)} elapsed"
        if self.total and 0 < self._done < self.total and rate > 0:
            text += f", about {_duration((self.total - self._done) / rate)} left"
        return text

    def _line(self) -> None:
        self._last_line = time.monotonic()
        self._written_at = self._done
        self.stream.write(self.line_text() + "\n")
        self.stream.flush()

    def close(self, failed: bool = False) -> None:
        """The last line (``failed``: none; the error that follows says what happened)."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self.mode == "lines" and self._written_at != self._done and not failed:
            self._line()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.close(failed=kind is not None)
