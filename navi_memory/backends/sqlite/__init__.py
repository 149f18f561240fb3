"""The embedded backend: one SQLite file, FTS5 for words, numpy for vectors (``backend``), with
the schema's numbered migrations (``schema``) and one mixin per concern: ``search`` (candidates),
``vectors`` (per-user in-memory vector indexes), ``sessions``, ``persons``, ``transfer``."""

from .backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
