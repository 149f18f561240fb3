"""Checked by mypy (tests/test_backend_protocol.py): the SQLite backend is a ``Backend``."""

from navi_memory.backends.base import Backend
from navi_memory.backends.sqlite import SQLiteBackend


def sqlite_is_a_backend(backend: SQLiteBackend) -> Backend:
    return backend
