"""A local HTTP server speaking enough of OpenAI's API (``/v1/embeddings``, ``/v1/chat/completions``)
for the provider tests: what llama.cpp's server, vLLM or LM Studio offer. Real sockets and the real
client (langchain-openai, the openai SDK); only the model behind them is missing: hashing vectors for
embeddings, the next scripted text for chat (``replies``). ``requests`` keeps each request's path,
body and Authorization header."""

from __future__ import annotations

import json
from typing import Any

from navi_memory.embeddings import HashingEmbeddings

from .ollama_server import JSONHandler, serve


class FakeOpenAI:
    def __init__(self, dimensions: int = 32) -> None:
        self.replies: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self._hashing = HashingEmbeddings(dimensions)
        owner = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                owner.requests.append({"path": self.path, "body": body,
                                       "authorization": self.headers.get("Authorization")})
                if self.path == "/v1/embeddings":
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    vectors = owner._hashing.embed_documents([str(t) for t in texts])
                    self._send(200, {"object": "list", "model": body["model"],
                                "data": [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                                         for i, v in enumerate(vectors)],
                                "usage": {"prompt_tokens": 5, "total_tokens": 5}})
                elif self.path == "/v1/chat/completions":
                    text = owner.replies.pop(0) if owner.replies else "{}"
                    self._send(200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600,
                                "model": body["model"],
                                "choices": [{"index": 0, "finish_reason": "stop",
                                             "message": {"role": "assistant", "content": text}}],
                                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
                else:
                    self._send(404, {"error": {"message": "not found"}})

        self._server, base = serve(Handler)
        self.url = f"{base}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
