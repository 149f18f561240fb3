"""A local HTTP server speaking enough of Ollama's API (``/api/embed``, ``/api/chat``) for fault tests.

``mode = "hang"`` holds every request longer than the client's timeout (a stuck provider),
``"error"`` answers 500, ``"ok"`` answers: hashing vectors for embeddings, the next scripted text
for chat (``replies``). ``requests`` counts what arrived, per path. Real sockets, real client
libraries (langchain-ollama, httpx); only the model behind them is missing.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from navi_memory.embeddings import HashingEmbeddings


class JSONHandler(BaseHTTPRequestHandler):
    """Answers with JSON; quiet (keeps test output clean)."""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """A server on a free loopback port, answering in a daemon thread; (server, its base URL)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class FakeOllama:
    def __init__(self, dimensions: int = 64, hang_seconds: float = 3.0) -> None:
        self.mode = "ok"
        self.replies: list[str] = []
        self.requests: dict[str, int] = {}
        self.hang_seconds = hang_seconds
        self._hashing = HashingEmbeddings(dimensions)
        owner = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                owner.requests[self.path] = owner.requests.get(self.path, 0) + 1
                if owner.mode == "hang":
                    time.sleep(owner.hang_seconds)
                    return
                if owner.mode == "error":
                    self._send(500, {"error": "model runner crashed"})
                    return
                if self.path == "/api/embed":
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    vectors = [[float(x) for x in v] for v in owner._hashing.embed_documents(texts)]
                    self._send(200, {"model": body["model"], "embeddings": vectors})
                elif self.path == "/api/chat":
                    text = owner.replies.pop(0) if owner.replies else "{}"
                    self._send(200, {"model": body["model"], "created_at": "2025-01-15T12:00:00Z",
                                     "message": {"role": "assistant", "content": text}, "done": True,
                                     "done_reason": "stop", "prompt_eval_count": 100, "eval_count": 20})
                else:
                    self._send(404, {"error": "not found"})

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
