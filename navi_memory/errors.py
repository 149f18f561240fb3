"""Every exception navi-memory raises on purpose.

The whole tree, in one place::

    NaviMemoryError                 base class: catch this to catch everything below
    ├── ConfigurationError          bad URL, unknown provider, an optional extra not installed
    ├── ValidationError             bad input: empty/oversized/NUL content, invalid enum, limit out of range
    ├── NotFoundError               unknown id, or an id that belongs to another user (indistinguishable)
    ├── MemoryOffError              the user turned memory off: nothing new is stored for them
    ├── EmbeddingError              the embedding provider failed, or returned a bad vector
    ├── ExtractionError             the chat model failed, or its reply was unusable even after a repair request
    └── StorageError                the database failed; the driver's exception is chained as __cause__
        ├── BackendUnavailableError the database cannot be reached or opened
        └── SchemaError             opened read-only, the database has no navi-memory schema (or an older one)

``ValidationError`` is also a ``ValueError`` and ``NotFoundError`` also a ``LookupError`` so code that
already catches the builtin families keeps working. Messages never contain passwords or API keys.
"""

from __future__ import annotations


class NaviMemoryError(Exception):
    """Base class of every error raised by navi-memory."""


class ConfigurationError(NaviMemoryError):
    """The store or a provider is configured wrongly, or an optional dependency is missing."""


class ValidationError(NaviMemoryError, ValueError):
    """An argument was rejected before anything was written."""


class NotFoundError(NaviMemoryError, LookupError):
    """No such row for this user (unknown id or another user's id)."""


class MemoryOffError(NaviMemoryError):
    """The user's memory is off (``set_memory_enabled(False, ...)``): a write that would store
    something new about them was refused, nothing written. Reads, deletes and export still work."""


class EmbeddingError(NaviMemoryError):
    """The embedding provider failed or produced an unusable vector."""


class RerankError(NaviMemoryError):
    """The optional reranking model of search failed or gave other than one score per text."""


class ExtractionError(NaviMemoryError):
    """The chat model behind fact extraction or summaries failed, or its reply could not be used.

    The memory pipeline records it on the session (state ``error``) and retries on the next run."""


class StorageError(NaviMemoryError):
    """The database backend failed; the original driver error is the ``__cause__``."""


class BackendUnavailableError(StorageError):
    """The database could not be opened or reached."""


__all__ = [
    "NaviMemoryError",
    "ConfigurationError",
    "ValidationError",
    "NotFoundError",
    "MemoryOffError",
    "EmbeddingError",
    "ExtractionError",
    "StorageError",
    "BackendUnavailableError",
    "SchemaError",
]


class SchemaError(StorageError):
    """A read-only open (``MemoryStore.open(url, read_only=True)``) found no navi-memory schema,
    or an older one: nothing was created; ``navi-memory migrate`` (or a writable open) creates it.
    ``empty``: there is no schema at all (nothing was ever stored there), not an older one."""

    def __init__(self, message: str, *, empty: bool = False) -> None:
        super().__init__(message)
        self.empty = empty
