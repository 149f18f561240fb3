"""``Shared``: what every concern of one store reads (embedder and its model, the previous embedder
while vectors move to a new model, chat model, reranker,
pipeline options, settings, clock) and the two rules they all apply to it. One instance per store;
the store's setters (``set_chat_model``, ``set_reranker``, ``pipeline``, ``embed_on_write``) change
it for every concern at once."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from ..core import validation as v
from ..config import Settings
from ..embeddings import Embedder
from ..errors import ConfigurationError
from ..models import FUSIONS, utcnow
from ..pipeline import PipelineOptions
from ..pipeline.llm import CallRecord, ChatClient
from ..reranking import Reranker

EMBED_BATCH = 32  # texts per embedding request


class Shared:
    def __init__(self, embedder: Embedder | None, *, settings: Settings, embedding_model: str | None = None,
                 fusion: str | None = None, embed_on_write: bool = True,
                 clock: Callable[[], datetime] | None = None, chat: ChatClient | None = None,
                 pipeline: PipelineOptions | None = None, previous_embedder: Embedder | None = None) -> None:
        self.embedder = embedder
        self.model = embedding_model or (embedder.model_name if embedder else None)  # None: lexical only
        # a move to ``model`` in progress (``reembed``): the embedder of the vectors being replaced
        self.previous_embedder = previous_embedder if self.model is not None else None
        self.previous_model = self.previous_embedder.model_name if self.previous_embedder else None
        if self.previous_model is not None and self.previous_model == self.model:
            raise ConfigurationError(f"the previous embeddings are the current model ({self.model}): nothing to move")
        self.settings = settings
        self.max_content_bytes = settings.max_content_bytes
        self.fusion = v.choice(fusion or settings.fusion, "fusion", FUSIONS)
        self.embed_on_write = embed_on_write
        self.clock = clock or utcnow
        self.chat = chat  # None: no-LLM mode, rules only
        self.pipeline = pipeline or PipelineOptions.from_settings(settings)
        self.reranker: Reranker | None = None  # the optional second ranking stage of search
        # rows were left without a vector by a provider outage (``memory.embed_new`` catches up)
        self.embedding_debt = False

    def now(self) -> datetime:
        return self.clock()

    def require_model(self) -> str:
        """The embedding model, on paths only taken with one."""
        if self.model is None:
            raise RuntimeError("an embedding step ran in a store without an embedding model")
        return self.model

    def embedder_of(self, model: str | None) -> Embedder | None:
        """The embedder of ``model`` (None: the store's)."""
        if model is None or model == self.model:
            return self.embedder
        return self.previous_embedder if model == self.previous_model else None

    def named_calls(self, ledger: list[CallRecord]) -> list[CallRecord]:
        """LLM calls to record, each with its model: a failed call has no reply to name it, the client does."""
        name = self.chat.name if self.chat is not None else None
        return [c if c.get("model") else {**c, "model": name} for c in ledger]

    def content(self, value: Any, field: str = "content") -> str:
        """A stored text: validated, at most ``max_content_bytes`` of UTF-8."""
        return v.text(value, field, self.max_content_bytes)


def fit_utf8(text: str, max_bytes: int) -> str:
    """``text`` cut (by tenths, never to nothing) until its UTF-8 fits ``max_bytes``."""
    while len(text.encode("utf-8")) > max_bytes:
        text = text[: max(1, int(len(text) * 0.9))]
    return text
