"""The store's operations, written once for the blocking and the asyncio store.

Each public operation is a generator (``sansio.Op``): it validates its input, *yields* the I/O
it needs (the requests of ``calls``) and receives the results. ``MemoryStore`` runs them with
blocking calls, ``AsyncMemoryStore`` with awaited ones; their typed public methods
(``store_api.py``, generated) are one line each over these generators.

One object per concern, all reading one ``Shared``: ``memory`` (items, summary, embeddings),
``themes``, ``search``, ``facts`` (facts and their history), ``sessions`` (conversations and extraction),
``persons`` (household and promotion), ``transfer`` (export and import) and ``keyed`` (items by
namespace and key, LangGraph's store model). The others write memory through ``memory`` and
``facts``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from ..config import Settings
from ..embeddings import Embedder
from ..pipeline import PipelineOptions
from ..pipeline.llm import ChatClient
from .facts import FactOperations
from .keyed import KeyedOperations
from .memory import MemoryOperations
from .persons import PersonOperations
from .search import SearchOperations
from .sessions import SessionOperations
from .embedding import EmbeddingOperations
from .shared import Shared
from .themes import ThemeOperations
from .transfer import TransferOperations


class StoreOperations:
    """The operations of one store, by concern, and the state they share."""

    def __init__(self, embedder: Embedder | None, *, settings: Settings,
                 embedding_model: str | None = None, fusion: str | None = None, embed_on_write: bool = True,
                 clock: Callable[[], datetime] | None = None, chat: ChatClient | None = None,
                 pipeline: PipelineOptions | None = None, previous_embedder: Embedder | None = None) -> None:
        self.shared = Shared(embedder, settings=settings, embedding_model=embedding_model, fusion=fusion,
                             embed_on_write=embed_on_write, clock=clock, chat=chat, pipeline=pipeline,
                             previous_embedder=previous_embedder)
        self.memory = MemoryOperations(self.shared)
        self.themes = ThemeOperations(self.shared)
        self.embedding = EmbeddingOperations(self.shared, self.memory)
        self.search = SearchOperations(self.shared, self.memory)
        self.facts = FactOperations(self.shared, self.memory)
        self.memory.edit_fact = self.facts.edit_from_item  # an item edit reaches the fact it mirrors
        self.memory.item_changed = self.facts.item_changed  # so do its archive and delete
        self.sessions = SessionOperations(self.shared, self.memory, self.facts)
        self.persons = PersonOperations(self.shared, self.memory, self.facts)
        self.transfer = TransferOperations(self.shared, self.memory, self.facts)
        self.keyed = KeyedOperations(self.shared, self.memory)
