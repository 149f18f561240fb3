"""navi-memory: long-term memory of users for LLM assistants.

``from navi_memory import MemoryStore`` then ``MemoryStore.open("sqlite:///memory.db")``.
Importing this package loads only the standard library and numpy; framework integrations live
in ``navi_memory.integrations`` and are imported on demand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (BackendUnavailableError, ConfigurationError, EmbeddingError, ExtractionError, MemoryOffError,
                     NaviMemoryError, NotFoundError, RerankError, SchemaError, StorageError, ValidationError)
from .models import (AddResult, ExtractionReport, Fact, FactChange, FactList, FactVersion, Item, Message, NoteAdded,
                     SearchResult, SearchResults, Session, Summary, SummaryHistory, SummaryText, TextVectors, Theme,
                     ToolCall)

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time these load on first use (below)
    from .config import Settings
    from .embeddings import HashingEmbeddings
    from .core.persons import Person, SpeakerInference
    from .pipeline import PipelineOptions
    from .promotion import PromotionReport
    from .store import AsyncMemoryStore, MemoryStore

_LAZY = {
    "MemoryStore": ("navi_memory.store", "MemoryStore"),
    "AsyncMemoryStore": ("navi_memory.store", "AsyncMemoryStore"),
    "Settings": ("navi_memory.config", "Settings"),
    "HashingEmbeddings": ("navi_memory.embeddings", "HashingEmbeddings"),
    "PipelineOptions": ("navi_memory.pipeline", "PipelineOptions"),
    "Person": ("navi_memory.core.persons", "Person"),
    "SpeakerInference": ("navi_memory.core.persons", "SpeakerInference"),
    "PromotionReport": ("navi_memory.promotion", "PromotionReport"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'navi_memory' has no attribute {name!r}")


__all__ = [
    "MemoryStore", "AsyncMemoryStore", "Settings", "HashingEmbeddings", "PipelineOptions",
    "Item", "NoteAdded", "Fact", "FactChange", "FactVersion", "Theme", "Summary", "SearchResult",
    "SearchResults", "FactList", "SummaryHistory", "SummaryText",
    "Session", "Message", "ToolCall", "ExtractionReport", "AddResult", "Person", "SpeakerInference",
    "PromotionReport", "TextVectors",
    "NaviMemoryError", "ConfigurationError", "ValidationError", "NotFoundError", "MemoryOffError", "EmbeddingError",
    "ExtractionError", "RerankError", "StorageError", "BackendUnavailableError", "SchemaError", "__version__",
]
