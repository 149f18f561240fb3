"""Settings read from the environment only when asked, and database URL parsing.

Environment variables (all optional):

====================================  ==========================================================
NAVI_MEMORY_URL                       database URL; default a SQLite file in the user's data dir
NAVI_MEMORY_EMBEDDINGS                ``auto`` (default), ``ollama``, ``local``, ``hashing``, ``none``
NAVI_MEMORY_EMBEDDING_MODEL           model name for the chosen provider
NAVI_MEMORY_EMBEDDING_DIM             fixed vector size: smaller vectors are zero-padded
NAVI_MEMORY_PREVIOUS_EMBEDDINGS       the model the vectors were made with, while ``reembed`` moves them to the
                                      new one (``provider:model``, e.g. ``ollama:nomic-embed-text``, or a provider)
NAVI_MEMORY_EMBEDDING_TIMEOUT         seconds before an embedding call is abandoned (default 30)
NAVI_MEMORY_EMBEDDING_PASSAGE_CHARS   a longer text is embedded as the mean of its passages of at most
                                      this many characters (default 1000, about MiniLM's window; 0 = whole)
NAVI_MEMORY_MAX_CONTENT_BYTES         largest accepted content, UTF-8 bytes (default 32768)
NAVI_MEMORY_FUSION                    ``weighted`` (default) or ``rrf``
NAVI_MEMORY_SEMANTIC_WEIGHT           share of the semantic signal in weighted fusion (default 0.6)
NAVI_MEMORY_MIN_SCORE                 relevance floor of search results on every surface (default 0.25; 0 = off);
                                      NAVI_MEMORY_MIN_SIMILARITY is read when it is not set
NAVI_MEMORY_INJECTION_TOKENS          token budget of the relevant memories put into a prompt (default 400)
EMBEDDING_OLLAMA_HOST                 Ollama server for embeddings; falls back to OLLAMA_HOST
EMBEDDING_OLLAMA_API_KEY              bearer token for that server (never logged)
NAVI_MEMORY_CHAT_MODEL                Ollama chat model for extraction and summaries (unset: no-LLM mode)
OLLAMA_HOST                           Ollama server for the chat model (and embeddings, unless overridden)
OLLAMA_API_KEY                        bearer token for the chat server (never logged)
NAVI_MEMORY_CHAT_TIMEOUT              seconds before a chat call is abandoned (default 120)
NAVI_MEMORY_CHAT_ATTEMPTS             tries of a chat call on rate limits and transient errors (default 3)
NAVI_MEMORY_CHAT_RETRY_WAIT           first wait before a retry, seconds; doubles with jitter (default 1)
NAVI_MEMORY_CHAT_RATE_LIMIT           most chat calls per second, per process (default: no limit)
NAVI_MEMORY_EXTRACT_EVERY             extract after this many new user messages (default 5; 0 = never)
NAVI_MEMORY_STALE_MINUTES             a session idle this long is processed (default 30)
NAVI_MEMORY_DEDUP_THRESHOLD           cosine similarity above which facts are compared for duplicates (0.8)
NAVI_MEMORY_TIMEZONE                  IANA time zone of "yesterday", "last week" in queries (default UTC)
NAVI_MEMORY_REPLICA_URLS              PostgreSQL streaming replicas of NAVI_MEMORY_URL for reads, comma-separated
====================================  ==========================================================
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar
from urllib.parse import unquote, urlsplit

from .errors import ConfigurationError
from .models import FUSIONS
from .prompt import INJECTION_TOKENS
from .core.timeutil import zone
from .passages import PASSAGE_CHARS

DEFAULT_MAX_CONTENT_BYTES = 32 * 1024
MIN_PASSAGE_CHARS = 100  # a passage of a few words says too little to stand for its part of a text
DEFAULT_OLLAMA_MODEL = "nomic-embed-text:latest"
DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"
# The relevance floor of search on every surface (a result's score: cosine + lexical credit;
# LoCoMo dev, MiniLM: docs/benchmarks.md)
DEFAULT_MIN_SIMILARITY = 0.25


def default_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if sys.platform == "win32":
        base = Path(env.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "navi-memory"


def default_url(environ: Mapping[str, str] | None = None) -> str:
    return f"sqlite:///{default_data_dir(environ) / 'memory.db'}"


N = TypeVar("N", int | None, float)


def _number_env(env: Mapping[str, str], name: str, default: N, kind: Callable[[str], N]) -> N:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError as exc:
        noun = "an integer" if kind is int else "a number"
        raise ConfigurationError(f"{name} must be {noun}, got {raw!r}") from exc


def _int_env(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    return _number_env(env, name, default, int)


def _float_env(env: Mapping[str, str], name: str, default: float) -> float:
    """A finite number of at least 0 (every such setting is a time, a rate or a threshold)."""
    value = _number_env(env, name, default, float)
    if not math.isfinite(value) or value < 0:
        raise ConfigurationError(f"{name} must be a finite number of at least 0, got {env.get(name, '').strip()!r}")
    return value


def _positive_int_env(env: Mapping[str, str], name: str, default: int) -> int:
    value = _int_env(env, name, default)
    if value is None or value < 1:
        raise ConfigurationError(f"{name} must be a whole number of at least 1")
    return value


def _share_env(env: Mapping[str, str], name: str, default: float) -> float:
    """A number from 0 to 1 (NaN is not one)."""
    raw = env.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be a number from 0 to 1") from exc
    if not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"{name} must be a number from 0 to 1")
    return value


def _provider_choice(raw: str) -> str:
    """``ollama`` or ``OpenAI:text-embedding-3-small``: the provider in lower case, a model name as given."""
    provider, sep, model = raw.strip().partition(":")
    return provider.strip().lower() + sep + model.strip()


_URL_FIELDS = ("url", "ollama_host", "chat_host", "embedding_url", "chat_url")
_SECRET_FIELDS = ("ollama_api_key", "chat_api_key", "embedding_api_key")
_QUERY_PASSWORD = re.compile(r"((?:^|&)password=)[^&]*", re.I)


@dataclass(frozen=True)
class Settings:
    url: str
    embeddings: str = "auto"
    embedding_model: str | None = None
    embedding_dimensions: int | None = None
    embedding_timeout: float = 30.0
    # a longer text is embedded as the mean of its passages (``passages``): models read a window only
    embedding_passage_chars: int = PASSAGE_CHARS
    previous_embeddings: str | None = None  # a move to a new model in progress: the old one (``reembed``)
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES
    fusion: str = "weighted"
    semantic_weight: float = 0.6
    min_similarity: float = DEFAULT_MIN_SIMILARITY  # the relevance floor (``min_score``; the name it had first)
    injection_tokens: int = INJECTION_TOKENS
    ollama_host: str | None = None
    ollama_api_key: str | None = field(default=None, repr=False)
    chat_model: str | None = None
    chat_host: str | None = None
    chat_api_key: str | None = field(default=None, repr=False)
    # a LangChain provider's endpoint and key ("openai:..." models: OpenAI, or any server speaking
    # its API, such as llama.cpp, vLLM or LM Studio)
    embedding_url: str | None = None
    embedding_api_key: str | None = field(default=None, repr=False)
    chat_url: str | None = None
    chat_timeout: float = 120.0
    chat_attempts: int = 3
    chat_retry_wait: float = 1.0
    chat_rate_limit: float | None = None
    extract_every: int = 5
    stale_minutes: float = 30.0
    dedup_threshold: float = 0.8
    reranker: str | None = None
    timezone: str = "UTC"  # the days of relative periods in queries ("yesterday"); search(timezone=) per call
    replica_urls: tuple[str, ...] = ()  # read replicas of ``url`` (docs/scaling.md "Read replicas")

    def __post_init__(self) -> None:
        chars = self.embedding_passage_chars
        if isinstance(chars, bool) or not isinstance(chars, int) or not (chars == 0 or chars >= MIN_PASSAGE_CHARS):
            raise ConfigurationError(f"embedding_passage_chars (NAVI_MEMORY_EMBEDDING_PASSAGE_CHARS) is 0 (texts"
                                     f" embedded whole) or a whole number of at least {MIN_PASSAGE_CHARS}")
        try:
            zone(self.timezone)
        except ValueError as exc:
            raise ConfigurationError(f"timezone (NAVI_MEMORY_TIMEZONE): {exc}") from exc

    @property
    def min_score(self) -> float:
        """The relevance floor of search on every surface (``NAVI_MEMORY_MIN_SCORE``, 0 = off)."""
        return self.min_similarity

    def __repr__(self) -> str:
        # URLs may carry passwords (postgresql://user:pw@..., http://user:pw@ollama): masked here
        shown = {name: mask_password(value) if name in _URL_FIELDS and isinstance(value, str) else value
                 for name, value in self.__dict__.items() if name not in _SECRET_FIELDS}
        shown["replica_urls"] = tuple(mask_password(replica) for replica in self.replica_urls)
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        fusion = env.get("NAVI_MEMORY_FUSION", "weighted").strip() or "weighted"
        if fusion not in FUSIONS:
            raise ConfigurationError(f"NAVI_MEMORY_FUSION must be one of {FUSIONS}, got {fusion!r}")
        timeout = _float_env(env, "NAVI_MEMORY_EMBEDDING_TIMEOUT", 30.0)
        return cls(
            url=env.get("NAVI_MEMORY_URL", "").strip() or default_url(env),
            semantic_weight=_share_env(env, "NAVI_MEMORY_SEMANTIC_WEIGHT", 0.6),
            min_similarity=_share_env(env, "NAVI_MEMORY_MIN_SCORE",
                                      _share_env(env, "NAVI_MEMORY_MIN_SIMILARITY", DEFAULT_MIN_SIMILARITY)),
            injection_tokens=_positive_int_env(env, "NAVI_MEMORY_INJECTION_TOKENS", INJECTION_TOKENS),
            embeddings=_provider_choice(env.get("NAVI_MEMORY_EMBEDDINGS", "")) or "auto",
            embedding_model=env.get("NAVI_MEMORY_EMBEDDING_MODEL", "").strip() or None,
            embedding_dimensions=_int_env(env, "NAVI_MEMORY_EMBEDDING_DIM", None),
            embedding_timeout=timeout,
            embedding_passage_chars=_int_env(env, "NAVI_MEMORY_EMBEDDING_PASSAGE_CHARS", PASSAGE_CHARS)
            or 0,
            previous_embeddings=env.get("NAVI_MEMORY_PREVIOUS_EMBEDDINGS", "").strip() or None,
            max_content_bytes=_int_env(env, "NAVI_MEMORY_MAX_CONTENT_BYTES", DEFAULT_MAX_CONTENT_BYTES)
            or DEFAULT_MAX_CONTENT_BYTES,
            fusion=fusion,
            ollama_host=(env.get("EMBEDDING_OLLAMA_HOST", "").strip() or env.get("OLLAMA_HOST", "").strip())
            or None,
            ollama_api_key=env.get("EMBEDDING_OLLAMA_API_KEY", "").strip() or None,
            chat_model=env.get("NAVI_MEMORY_CHAT_MODEL", "").strip() or None,
            chat_host=env.get("OLLAMA_HOST", "").strip() or None,
            chat_api_key=(env.get("NAVI_MEMORY_CHAT_API_KEY", "").strip() or env.get("OLLAMA_API_KEY", "").strip())
            or None,
            embedding_url=env.get("NAVI_MEMORY_EMBEDDING_URL", "").strip() or None,
            embedding_api_key=env.get("NAVI_MEMORY_EMBEDDING_API_KEY", "").strip() or None,
            chat_url=env.get("NAVI_MEMORY_CHAT_URL", "").strip() or None,
            chat_timeout=_float_env(env, "NAVI_MEMORY_CHAT_TIMEOUT", 120.0),
            chat_attempts=max(1, _int_env(env, "NAVI_MEMORY_CHAT_ATTEMPTS", 3) or 1),
            chat_retry_wait=_float_env(env, "NAVI_MEMORY_CHAT_RETRY_WAIT", 1.0),
            chat_rate_limit=_float_env(env, "NAVI_MEMORY_CHAT_RATE_LIMIT", 0.0) or None,
            extract_every=_int_env(env, "NAVI_MEMORY_EXTRACT_EVERY", 5) or 0,
            stale_minutes=_float_env(env, "NAVI_MEMORY_STALE_MINUTES", 30.0),
            dedup_threshold=_float_env(env, "NAVI_MEMORY_DEDUP_THRESHOLD", 0.8),
            reranker=env.get("NAVI_MEMORY_RERANKER", "").strip() or None,
            timezone=env.get("NAVI_MEMORY_TIMEZONE", "").strip() or "UTC",
            replica_urls=tuple(part.strip() for part in env.get("NAVI_MEMORY_REPLICA_URLS", "").split(",")
                               if part.strip()),
        )


@dataclass(frozen=True)
class DatabaseURL:
    scheme: str  # "sqlite" or "postgresql"
    path: str | None = None  # sqlite file path (":memory:" allowed)
    dsn: str | None = field(default=None, repr=False)  # full libpq URL, may hold a password
    safe: str = ""  # the URL with any password masked, for messages and logs

    def __str__(self) -> str:
        return self.safe


def mask_password(url: str) -> str:
    """The URL with the password of its user part and any ``password=`` query parameter masked."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not parseable as a URL: show nothing of it
        return "***"
    if password is None and "password" not in parts.query.lower():
        return url  # untouched (geturl() would normalise e.g. sqlite:/// to sqlite:/)
    if password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@", 1))
    return parts._replace(query=_QUERY_PASSWORD.sub(r"\1***", parts.query)).geturl()


def parse_url(url: str) -> DatabaseURL:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:``, ``postgresql://...``."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError("database URL is empty")
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise ConfigurationError(f"not a database URL (expected sqlite:/// or postgresql://): {mask_password(url)}")
    if scheme == "sqlite":
        if not rest.startswith("/"):
            raise ConfigurationError("SQLite URLs look like sqlite:///path/to/memory.db")
        path = unquote(rest[1:].split("?", 1)[0])
        if not path:
            raise ConfigurationError("SQLite URL has no file path")
        return DatabaseURL("sqlite", path=path, safe=url)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        dsn = "postgresql://" + rest
        return DatabaseURL("postgresql", dsn=dsn, safe=mask_password(dsn))
    raise ConfigurationError(f"unsupported database scheme {scheme!r}: use sqlite:/// or postgresql://")
