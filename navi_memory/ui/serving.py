"""Running the web apps under uvicorn, with a limit on how long a client may take to send a request.

uvicorn closes idle keep-alive connections, but a client that opens a connection and sends its
request line and headers a byte at a time holds a worker slot for as long as it likes (slowloris).
``header_timeout_protocol`` gives uvicorn's h11 protocol a timer from the connection's start (and
from the end of each response) to the arrival of a complete request head: past it, the
connection is closed.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0  # seconds for a request line and headers, like common reverse proxies


def header_timeout_protocol(seconds: float = HEADER_TIMEOUT) -> type[H11Protocol]:
    """uvicorn's h11 protocol closing connections whose request head takes longer than ``seconds``."""

    class HeaderTimeoutProtocol(H11Protocol):
        _head_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(seconds, self._head_too_slow)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:  # a whole request head arrived: a new request cycle
                self._disarm()

        def on_response_complete(self) -> None:
            self._arm()  # the next request on this connection gets the same limit (armed first:
            super().on_response_complete()  # a pipelined request handled in here disarms it)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol
