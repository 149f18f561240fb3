"""Deterministic test doubles: a LangChain-style embeddings provider and a controllable clock."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from navi_memory.embeddings import HashingEmbeddings

START = datetime(2025, 1, 15, 12, 0, tzinfo=timezone.utc)


class FakeEmbeddings:
    """Duck-typed LangChain ``Embeddings`` over ``HashingEmbeddings``.

    ``fail = True`` simulates a provider outage (every call raises ``ConnectionError``).
    ``document_calls`` / ``query_calls`` count provider calls, ``embedded_texts`` every text embedded.
    ``model`` names the vectors (the store calls them ``FakeEmbeddings:<model>``).
    """

    def __init__(self, model: str = "fake-hash", dimensions: int = 64) -> None:
        self.model = model
        self.dimensions = dimensions
        self._hashing = HashingEmbeddings(dimensions)
        self.fail = False
        self.document_calls = 0
        self.query_calls = 0
        self.embedded_texts: list[str] = []

    @property
    def calls(self) -> int:
        return self.document_calls + self.query_calls

    def _check(self) -> None:
        if self.fail:
            raise ConnectionError("embedding provider unreachable (simulated outage)")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls += 1
        self._check()
        self.embedded_texts.extend(texts)
        return self._hashing.embed_documents(list(texts))

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        self._check()
        return self._hashing.embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)

    def expected(self, text: str) -> list[float]:
        """The vector this fake makes for ``text`` (without counting a call)."""
        return self._hashing.embed_query(text)


class FakeClock:
    """A callable returning an aware UTC datetime that only moves when told to."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, days: float = 0, **kwargs: float) -> datetime:
        self.now = self.now + timedelta(days=days, **kwargs)
        return self.now

    def set(self, when: datetime) -> None:
        self.now = when
