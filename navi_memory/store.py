"""``MemoryStore`` (blocking) and ``AsyncMemoryStore`` (asyncio): the same operations, two runners.

The operations live in ``operations`` (one object per concern: memory, search, facts, sessions,
persons, transfer, keyed) as generators that yield their I/O; the typed public methods over them
are generated into ``store_api`` / ``store_api_async``. This module opens a store (settings,
embedder, chat model, reranker, backend) and decides how that I/O is executed: database calls
(``at_once`` ones concurrently), embedding, chat-model (``invoke`` / ``await ainvoke``) and
reranking calls, and background work such as extractions (a worker thread / asyncio tasks).
Nothing here knows SQL or ranking.

``AsyncMemoryStore``'s runner is the source of ``MemoryStore``'s: ``scripts/gen_sync.py`` writes the
blocking methods between the ``# gen_sync`` markers; only what really differs (``__init__``,
``close``, worker threads against ``asyncio.gather`` for ``at_once``) is written twice.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from .backends import open_async_backend, open_backend
from .backends.base import SharesReads
from .calls import AtOnce, BackendCall, Chat, EmbedDocuments, EmbedQuery, Pause, Request, Rerank, Spawn
from .config import Settings, parse_url
from .embeddings import Embedder, resolve_embedder, resolve_previous_embedder
from .errors import ConfigurationError, NaviMemoryError, SchemaError
from .pipeline import PipelineOptions
from .pipeline.background import TaskJobs, ThreadJobs
from .pipeline.llm import ChatClient, resolve_chat_model
from .reranking import Reranker, resolve_reranker
from .sansio import Op, T, advance
from .store_api import MemoryStoreAPI
from .store_api_async import AsyncMemoryStoreAPI
from .operations import StoreOperations

if TYPE_CHECKING:
    from .backends.async_base import AsyncBackend
    from .backends.base import Backend

log = logging.getLogger("navi_memory")


class _StoreBase:
    """State and helpers shared by both runners; the operations live in ``self._ops``."""

    def __init__(self, backend: Any, embedder: Embedder | None, *, settings: Settings,
                 embedding_model: str | None = None, fusion: str | None = None, embed_on_write: bool = True,
                 clock: Callable[[], datetime] | None = None, chat: ChatClient | None = None,
                 pipeline: PipelineOptions | None = None, reranker: Reranker | None = None,
                 previous_embedder: Embedder | None = None) -> None:
        self._backend = backend
        # checked once: an isinstance of a runtime Protocol costs ~13 us, and a search asks at each at_once
        self._shares_reads = isinstance(backend, SharesReads)
        self._ops = StoreOperations(embedder=embedder, settings=settings, embedding_model=embedding_model,
                                    fusion=fusion, embed_on_write=embed_on_write, clock=clock, chat=chat,
                                    pipeline=pipeline, previous_embedder=previous_embedder)
        self._ops.shared.reranker = reranker

    def _shared(self, calls: tuple[BackendCall, ...]) -> tuple[list[int], list[int]]:
        """The indexes of the calls of an ``AtOnce`` the backend sends together on one connection
        (when two or more may: a ``SharesReads`` backend; PostgreSQL pipelines short reads), and of
        the others."""
        backend = self._backend
        shared = [i for i, call in enumerate(calls) if self._shares_reads and backend.can_share(call.method)]
        shared = shared if len(shared) > 1 else []
        return shared, [i for i in range(len(calls)) if i not in shared]

    @staticmethod
    def _schema_error(version: int, settings: Settings) -> SchemaError:
        found = "no navi-memory schema" if version == 0 else f"schema version {version}, older than this code's"
        return SchemaError(f"{parse_url(settings.url)} has {found}: nothing was changed"
                           " (navi-memory migrate creates or upgrades it)", empty=version == 0)

    def __repr__(self) -> str:
        url = self.settings.url
        return f"{type(self).__name__}({url and parse_url(url)!s}, embeddings={self.embedding_model!r})"

    @property
    def settings(self) -> Settings:
        return self._ops.shared.settings

    @property
    def embedding_model(self) -> str | None:
        """Name of the vectors this store writes and searches (None: lexical only)."""
        return self._ops.shared.model

    @property
    def embedder(self) -> Embedder | None:
        return self._ops.shared.embedder

    @property
    def chat_model(self) -> ChatClient | None:
        """The chat model used for extraction and summaries (None: no-LLM mode, rules only)."""
        return self._ops.shared.chat

    def set_chat_model(self, model: Any) -> None:
        """Use another chat model: a LangChain chat model, an Ollama model name, or None/False for none."""
        self._ops.shared.chat = resolve_chat_model(model if model is not None else False, self.settings)

    @property
    def pipeline(self) -> PipelineOptions:
        """When and how conversations are turned into memory (triggers, leases, chunks)."""
        return self._ops.shared.pipeline

    @pipeline.setter
    def pipeline(self, options: PipelineOptions) -> None:
        self._ops.shared.pipeline = options

    @property
    def fusion(self) -> str:
        """Default fusion of the lexical and semantic candidate lists (``weighted`` or ``rrf``)."""
        return self._ops.shared.fusion

    @property
    def embed_on_write(self) -> bool:
        """Whether writes embed their rows at once (else they stay pending until ``backfill``)."""
        return self._ops.shared.embed_on_write

    @embed_on_write.setter
    def embed_on_write(self, value: bool) -> None:
        self._ops.shared.embed_on_write = value

    @property
    def max_content_bytes(self) -> int:
        return self._ops.shared.max_content_bytes

    def _now(self) -> datetime:
        return self._ops.shared.now()

    def _chat(self) -> ChatClient:
        if self._ops.shared.chat is None:  # operations ask only when a chat model is set
            raise RuntimeError("an operation asked for the chat model of a store without one")
        return self._ops.shared.chat

    @property
    def reranker(self) -> Reranker | None:
        """The optional second ranking stage of search (None: off)."""
        return self._ops.shared.reranker

    def set_reranker(self, model: Any) -> None:
        """Re-rank search results with ``model``: a callable ``(query, texts) -> scores``, a
        ``CrossEncoder``, a LangChain document compressor, ``'cross-encoder:<model>'``, or
        None/False for none (``navi_memory.reranking``)."""
        self._ops.shared.reranker = resolve_reranker(model if model is not None else False)

    def _reranker(self) -> Reranker:
        if self._ops.shared.reranker is None:  # operations ask only when a reranker is set
            raise RuntimeError("an operation asked for the reranker of a store without one")
        return self._ops.shared.reranker

    def _embedder_for(self, request: EmbedQuery | EmbedDocuments) -> Embedder:
        embedder = self._ops.shared.embedder_of(request.model)
        if embedder is None:  # operations embed only with an embedder of the model they name
            raise RuntimeError(f"an operation asked for {request!r} from a store without that embedder")
        return embedder

    @staticmethod
    def _settings(url: str | None, settings: Settings | None) -> Settings:
        settings = settings or Settings.from_env()
        if url is None or url == settings.url:
            return settings
        return Settings(**{**settings.__dict__, "url": url, "replica_urls": ()})  # the replicas are settings.url's

    @staticmethod
    def _backend_options(settings: Settings, options: dict[str, Any] | None) -> dict[str, Any]:
        """``options``, with the settings' read replicas (``NAVI_MEMORY_REPLICA_URLS``) unless they name some."""
        if settings.replica_urls and "replica_urls" not in (options or {}):
            if parse_url(settings.url).scheme != "postgresql":
                raise ConfigurationError("NAVI_MEMORY_REPLICA_URLS are replicas of a PostgreSQL NAVI_MEMORY_URL,"
                                         f" not of {parse_url(settings.url)}")
            return {**(options or {}), "replica_urls": list(settings.replica_urls)}
        return dict(options or {})

    @staticmethod
    def _lexical_only_backend(backend: Any, embedder: Embedder | None) -> Embedder | None:
        if not backend.has_vector:
            reason = backend.vector_error or "the vector extension is not installed"
            log.warning("pgvector is not available (%s): memory runs lexical-only (full-text search)", reason)
            return None
        return embedder


class MemoryStore(MemoryStoreAPI, _StoreBase):
    """Long-term memory of users, blocking API. Open with ``MemoryStore.open(url)``."""

    # gen_sync: MemoryStore, generated by scripts/gen_sync.py from its async source: do not edit
    @classmethod
    def open(cls, url: str | None = None, embeddings: Any = None, *, embedding_model: str | None = None,
             settings: Settings | None = None, migrate: bool = True, fusion: str | None = None,
             embed_on_write: bool = True, clock: Callable[[], datetime] | None = None,
             backend_options: dict[str, Any] | None = None, chat_model: Any = None, reranker: Any = None,
             pipeline: PipelineOptions | None = None, read_only: bool = False,
             previous_embeddings: Any = None) -> MemoryStore:
        """Open (and by default migrate) the store at ``url`` (default: ``NAVI_MEMORY_URL`` or a
        SQLite file in the user's data dir). ``embeddings``: a LangChain ``Embeddings``, a provider
        name (``ollama``, ``local``, ``hashing``, ``none``), ``False``, or None for the environment.
        ``chat_model``: a LangChain chat model for fact extraction and summaries, an Ollama model
        name, ``False`` for none (rules only), or None for the environment (``NAVI_MEMORY_CHAT_MODEL``).
        ``read_only=True``: create nothing (no file, no table; for read-only tools): a database
        without the current schema is a ``SchemaError``. Writes through such a store still work
        on a current schema; the flag only promises that opening changes nothing.
        ``previous_embeddings`` (as ``embeddings``; None: ``NAVI_MEMORY_PREVIOUS_EMBEDDINGS``, else
        none): the model the store's vectors were made with, while ``reembed`` moves them to the
        model of ``embeddings``; each user's searches read the old vectors until theirs are all moved."""
        settings = cls._settings(url, settings)
        embedder = resolve_embedder(embeddings, settings)
        previous = resolve_previous_embedder(previous_embeddings, settings, embedder)
        chat = resolve_chat_model(chat_model, settings)
        rerank = resolve_reranker(reranker, settings.reranker)
        options = cls._backend_options(settings, backend_options)
        backend = open_backend(parse_url(settings.url), read_only, **options)
        if read_only and (version := backend.schema_version()) < backend.schema_latest:
            backend.close()
            raise cls._schema_error(version, settings)
        if migrate and not read_only:
            backend.migrate()
        embedder = cls._lexical_only_backend(backend, embedder)
        return cls(backend, embedder, settings=settings, embedding_model=embedding_model, fusion=fusion,
                   embed_on_write=embed_on_write, clock=clock, chat=chat, pipeline=pipeline, reranker=rerank,
                   previous_embedder=previous if embedder is not None else None)

    def migrate(self) -> int:
        """Create or upgrade the schema (idempotent); returns the schema version."""
        version: int = self._backend.migrate()
        return version

    def wait_for_background(self, timeout: float | None = None) -> bool:
        """Wait until the queued background extractions have finished; False if ``timeout`` ran out."""
        return self._jobs.wait(timeout)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _execute(self, request: Request) -> Any:
        if isinstance(request, BackendCall):
            return getattr(self._backend, request.method)(**request.kwargs)
        if isinstance(request, AtOnce):
            return self._execute_all(request.calls)
        if isinstance(request, Chat):
            return self._chat().invoke(request.purpose, request.messages, schema=request.schema)
        if isinstance(request, Spawn):
            method = getattr(self, request.operation)
            return self._jobs.submit(request.key, lambda: method(*request.args, **request.kwargs))
        if isinstance(request, EmbedQuery):
            return self._embedder_for(request).embed_query(request.text)
        if isinstance(request, EmbedDocuments):
            return self._embedder_for(request).embed_documents(request.texts)
        if isinstance(request, Rerank):
            return self._reranker().score(request.query, request.texts)
        if isinstance(request, Pause):
            return time.sleep(request.seconds)
        raise TypeError(f"an operation yielded {request!r}, not a request of navi_memory.calls")

    def _outcome(self, call: BackendCall) -> tuple[Any, NaviMemoryError | None]:
        try:
            return self._execute(call), None
        except NaviMemoryError as exc:
            return None, exc

    def _run(self, gen: Op[T]) -> T:
        done, out = advance(gen, None, None)
        while not done:
            try:
                value, error = self._execute(out), None
            except Exception as exc:  # thrown into the operation: it may handle a NaviMemoryError, and
                value, error = None, exc  # anything else leaves through it, so its line is in the traceback
            done, out = advance(gen, value, error)
        return out  # type: ignore[no-any-return]  # the generator's return value, typed by Op[T]
    # gen_sync: end

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._jobs = ThreadJobs()
        self._workers: ThreadPoolExecutor | None = None  # for calls an operation runs at once
        self._workers_lock = threading.Lock()

    @property
    def backend(self) -> Backend:
        """The storage backend, typed as the ``Backend`` Protocol; a backend's own methods need its
        class (PostgreSQL's ``build_vector_index``: ``cast(PostgresBackend, store.backend)``)."""
        backend: Backend = self._backend
        return backend

    def close(self) -> None:
        """Finish queued background extractions, then close the database."""
        self._jobs.close()
        if self._workers is not None:
            self._workers.shutdown(wait=True)
        self._backend.close()

    def _execute_all(self, calls: tuple[BackendCall, ...]) -> list[tuple[Any, NaviMemoryError | None]]:
        """All at the same time: the first call the backend runs alone on this thread (``at_once``:
        the longest), the calls it sends together (``_shared``) and the other ones on worker
        threads. The calling thread then waits for the longest call directly: a result a worker
        hands over wakes it later, a thread switch after the call finished."""
        shared, alone = self._shared(calls)
        if not alone:
            outcomes: list[tuple[Any, NaviMemoryError | None]] = self._backend.run_shared(list(calls))
            return outcomes
        others = {i: self._worker_pool().submit(self._outcome, calls[i]) for i in alone[1:]}
        sent = self._worker_pool().submit(self._backend.run_shared, [calls[i] for i in shared]) if shared else None
        out = {alone[0]: self._outcome(calls[alone[0]])}
        if sent is not None:
            out.update(zip(shared, sent.result()))
        return [out[i] if i in out else others[i].result() for i in range(len(calls))]

    def _worker_pool(self) -> ThreadPoolExecutor:
        with self._workers_lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="navi-memory-io")
            return self._workers


class AsyncMemoryStore(AsyncMemoryStoreAPI, _StoreBase):
    """Long-term memory of users, asyncio API. Open with ``await AsyncMemoryStore.open(url)``."""

    # gen_sync: source of MemoryStore
    @classmethod
    async def open(cls, url: str | None = None, embeddings: Any = None, *, embedding_model: str | None = None,
                   settings: Settings | None = None, migrate: bool = True, fusion: str | None = None,
                   embed_on_write: bool = True, clock: Callable[[], datetime] | None = None,
                   backend_options: dict[str, Any] | None = None, chat_model: Any = None, reranker: Any = None,
                   pipeline: PipelineOptions | None = None, read_only: bool = False,
                   previous_embeddings: Any = None) -> AsyncMemoryStore:
        """Open (and by default migrate) the store at ``url`` (default: ``NAVI_MEMORY_URL`` or a
        SQLite file in the user's data dir). ``embeddings``: a LangChain ``Embeddings``, a provider
        name (``ollama``, ``local``, ``hashing``, ``none``), ``False``, or None for the environment.
        ``chat_model``: a LangChain chat model for fact extraction and summaries, an Ollama model
        name, ``False`` for none (rules only), or None for the environment (``NAVI_MEMORY_CHAT_MODEL``).
        ``read_only=True``: create nothing (no file, no table; for read-only tools): a database
        without the current schema is a ``SchemaError``. Writes through such a store still work
        on a current schema; the flag only promises that opening changes nothing.
        ``previous_embeddings`` (as ``embeddings``; None: ``NAVI_MEMORY_PREVIOUS_EMBEDDINGS``, else
        none): the model the store's vectors were made with, while ``reembed`` moves them to the
        model of ``embeddings``; each user's searches read the old vectors until theirs are all moved."""
        settings = cls._settings(url, settings)
        embedder = resolve_embedder(embeddings, settings)
        previous = resolve_previous_embedder(previous_embeddings, settings, embedder)
        chat = resolve_chat_model(chat_model, settings)
        rerank = resolve_reranker(reranker, settings.reranker)
        options = cls._backend_options(settings, backend_options)
        backend = await open_async_backend(parse_url(settings.url), read_only, **options)
        if read_only and (version := await backend.schema_version()) < backend.schema_latest:
            await backend.close()
            raise cls._schema_error(version, settings)
        if migrate and not read_only:
            await backend.migrate()
        embedder = cls._lexical_only_backend(backend, embedder)
        return cls(backend, embedder, settings=settings, embedding_model=embedding_model, fusion=fusion,
                   embed_on_write=embed_on_write, clock=clock, chat=chat, pipeline=pipeline, reranker=rerank,
                   previous_embedder=previous if embedder is not None else None)

    async def migrate(self) -> int:
        """Create or upgrade the schema (idempotent); returns the schema version."""
        version: int = await self._backend.migrate()
        return version

    async def wait_for_background(self, timeout: float | None = None) -> bool:
        """Wait until the queued background extractions have finished; False if ``timeout`` ran out."""
        return await self._jobs.wait(timeout)

    async def __aenter__(self) -> AsyncMemoryStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _execute(self, request: Request) -> Any:
        if isinstance(request, BackendCall):
            return await getattr(self._backend, request.method)(**request.kwargs)
        if isinstance(request, AtOnce):
            return await self._execute_all(request.calls)
        if isinstance(request, Chat):
            return await self._chat().ainvoke(request.purpose, request.messages, schema=request.schema)
        if isinstance(request, Spawn):
            method = getattr(self, request.operation)
            return self._jobs.submit(request.key, lambda: method(*request.args, **request.kwargs))
        if isinstance(request, EmbedQuery):
            return await self._embedder_for(request).aembed_query(request.text)
        if isinstance(request, EmbedDocuments):
            return await self._embedder_for(request).aembed_documents(request.texts)
        if isinstance(request, Rerank):
            return await self._reranker().ascore(request.query, request.texts)
        if isinstance(request, Pause):
            return await asyncio.sleep(request.seconds)
        raise TypeError(f"an operation yielded {request!r}, not a request of navi_memory.calls")

    async def _outcome(self, call: BackendCall) -> tuple[Any, NaviMemoryError | None]:
        try:
            return await self._execute(call), None
        except NaviMemoryError as exc:
            return None, exc

    async def _run(self, gen: Op[T]) -> T:
        done, out = advance(gen, None, None)
        while not done:
            try:
                value, error = await self._execute(out), None
            except Exception as exc:  # thrown into the operation: it may handle a NaviMemoryError, and
                value, error = None, exc  # anything else leaves through it, so its line is in the traceback
            done, out = advance(gen, value, error)
        return out  # type: ignore[no-any-return]  # the generator's return value, typed by Op[T]
    # gen_sync: end

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._jobs = TaskJobs()

    @property
    def backend(self) -> AsyncBackend:
        """The storage backend, typed as ``AsyncBackend`` (the ``Backend`` Protocol, awaited)."""
        backend: AsyncBackend = self._backend
        return backend

    async def close(self) -> None:
        """Finish background extraction tasks, then close the database."""
        await self._jobs.close()
        await self._backend.close()

    async def _execute_all(self, calls: tuple[BackendCall, ...]) -> list[tuple[Any, NaviMemoryError | None]]:
        """All at the same time: the calls the backend sends together (``_shared``) as one task, each
        other call as a task of its own."""
        shared, alone = self._shared(calls)
        together = [self._backend.run_shared([calls[i] for i in shared])] if shared else []
        done = await asyncio.gather(*together, *(self._outcome(calls[i]) for i in alone))
        out = {**dict(zip(shared, done[0] if shared else [])), **dict(zip(alone, done[len(together):]))}
        return [out[i] for i in range(len(calls))]
