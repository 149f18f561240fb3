"""Storage backends behind one protocol (see ``base.Backend``)."""

from __future__ import annotations

from typing import Any

from ..config import DatabaseURL
from ..errors import ConfigurationError


def open_backend(url: DatabaseURL, **options: Any) -> Any:
    """The synchronous backend for a parsed URL; heavy drivers are imported only here."""
    if url.scheme == "sqlite":
        from .sqlite import SQLiteBackend

        return SQLiteBackend(url.path or ":memory:", **options)
    raise ConfigurationError(f"no backend for {url.scheme!r} yet")
