"""A dependency-free progress bar on stderr (redraws in place on a terminal, sparse lines otherwise)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._last = 0.0
        self._done = 0
        self._drawn_at = -1

    def __call__(self, done: int, total: int | None = None) -> None:
        self._done = done
        if total is not None:
            self.total = total
        now = time.monotonic()
        if now - self._last < (0.1 if self.tty else 5.0) and done != self.total:
            return
        self._last = now
        self._drawn_at = done
        self._draw(end="" if self.tty else "\n")

    def _draw(self, end: str) -> None:
        if self.total:
            frac = min(1.0, self._done / self.total)
            bar = "#" * int(frac * 30)
            text = f"{self.label} [{bar:<30}] {self._done}/{self.total}"
        else:
            text = f"{self.label} {self._done}"
        self.stream.write(("\r" if self.tty else "") + text + end)
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
        elif self._drawn_at != self._done:
            self._draw(end="\n")
