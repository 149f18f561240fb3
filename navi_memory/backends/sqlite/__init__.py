"""The embedded backend: one SQLite file, FTS5 for words, numpy for vectors (``backend``), with
the schema's numbered migrations (``schema``) and one mixin per concern: ``search`` (candidates),
``sessions``, ``persons``, ``transfer``, ``keyed``; ``vectors`` holds the per-user in-memory vector
indexes, ``metadata`` compiles metadata filters, ``rows`` turns rows into dicts."""

from .backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
