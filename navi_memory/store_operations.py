"""``StoreOperations``: every operation of the store and the state they share.

One instance belongs to one store; its public methods are generators (``sansio.Op``) that the
store's runner executes. The typed public methods of ``MemoryStore`` / ``AsyncMemoryStore``
(``store_api.py``) are one line each over these generators.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from . import validation as v
from .config import Settings
from .embeddings import Embedder
from .models import FUSIONS, utcnow
from .person_operations import PersonOperations
from .pipeline import PipelineOptions
from .pipeline.llm import ChatClient
from .session_operations import SessionOperations
from .transfer_operations import TransferOperations


class StoreOperations(SessionOperations, PersonOperations, TransferOperations):
    """The operations of one store, with the embedder, chat model and settings they use."""

    def __init__(self, embedder: Embedder | None, *, settings: Settings,
                 embedding_model: str | None = None, fusion: str | None = None, embed_on_write: bool = True,
                 clock: Callable[[], datetime] | None = None, chat: ChatClient | None = None,
                 pipeline: PipelineOptions | None = None) -> None:
        self._embedder = embedder
        self._model = embedding_model or (embedder.model_name if embedder else None)
        self.settings = settings
        self.max_content_bytes = settings.max_content_bytes
        self.fusion = v.choice(fusion or settings.fusion, "fusion", FUSIONS)
        self.embed_on_write = embed_on_write
        self._clock = clock or utcnow
        self._chat = chat
        self.pipeline = pipeline or PipelineOptions.from_settings(settings)
