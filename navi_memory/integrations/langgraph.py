"""A LangGraph ``BaseStore`` kept in navi-memory: ``NaviStore(store)``.

``create_agent(model, tools, store=NaviStore(store))``, ``graph.compile(store=...)``, LangMem's
memory tools and ``get_store()`` then read and write navi-memory items: a LangGraph namespace and
key are the item's namespace and external key, the value dict is its metadata (returned exactly
as put), and the text at the index fields is its content, so ``search(query=...)`` is the store's
hybrid search. The user an item belongs to is found as in every adapter (``_identity``: the run's
``runtime.context``, ``acting_for``, ``configurable.user_id``, the bound ``user_id``; two different
ones raise), and with ``user_label=i`` the namespace's label ``i``, which must name that same user
where one is named. Needs the ``langchain`` extra (LangGraph).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Coroutine, Optional, cast

import numpy as np

from langgraph.store.base import (BaseStore, GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchItem, SearchOp,
                                  TTLConfig)

from ..core import validation as v
from ..errors import EmbeddingError, NaviMemoryError, StorageError, ValidationError
from ..models import Item as NaviItem, SearchResult, TextVectors
from . import _fields
from . import _ops as reading
from ._caller import AnyStore, Plan, StoreCaller, store_call
from ._identity import IdentityResolver
from ._merge import Merger

__all__ = ["NaviStore"]

log = logging.getLogger("navi_memory.integrations")

PRIVATE = "_langgraph"  # NaviStore's own metadata (index=False), never shown in a value
DEFAULT_SWEEP_MINUTES = 5.0  # how often start_ttl_sweeper() sweeps without ttl={"sweep_interval_minutes": ...}
MAX_SEARCH = 50  # the store's search limit: a query search reaches offset + limit <= 50
LOCAL_SCAN = 10_000  # the store's list limit: how far a filter on a list value looks
RANKINGS = ("similarity", "hybrid")
EMBED_TEXTS = 256  # texts per embed_texts call (the store's limit)
CONCURRENT_BATCHES = 8  # merged batches running at once per event loop (each a store call at a time)
MERGED_OPS = 1_000  # ops of concurrent callers run as one batch

# The op generators are plans of store calls (``yield from store_call.x(...)``: the call's typed
# result), run on the blocking or the async store.
Call = tuple[Op, str]  # an op and the user it acts for


class NaviStore(BaseStore):
    """LangGraph's ``BaseStore`` over a ``MemoryStore`` or an ``AsyncMemoryStore``.

    ``NaviStore(store, user_id=None, user_label=None, index=None, ttl=None, ranking="similarity")``:

    - the user of each call: the one its LangGraph run names (``runtime.context.user_id``,
      ``configurable.user_id`` / ``langgraph_user_id``, ``acting_for(...)``) or ``user_id``; two
      different ones raise ``ValidationError``. With ``user_label=i``, label ``i`` of the namespace
      (``1`` or ``-1`` for LangMem's ``("memories", "{langgraph_user_id}")``) names the user: a
      call whose run or binding names another user is refused; outside a run, unbound, the label decides.
    - ``index={"fields": ["text", ...]}``: the value's text at these paths (LangGraph's path syntax,
      ``"$"`` the whole value) is the item's content, searched by ``search(query=...)``; a put's
      own ``index=[...]`` or ``index=False`` overrides it. Without ``index`` nothing is indexed and
      a query is ignored, as in LangGraph's stores. The store's embedder embeds (``embed`` and
      ``dims`` are LangGraph's own stores' settings and are refused). Each text is scored on its
      own, an item by its best (as LangGraph's stores do): an item with several texts keeps their
      vectors beside its own (``_fields``). ``"distance_type"``: ``"cosine"`` (default), ``"l2"``
      (minus the distance) or ``"inner_product"``, the scale of ``score``.
    - ``ranking``: how a query search orders and scores. ``"similarity"`` (default, as LangGraph's
      stores): every item the filter passes is a result, ordered by the similarity of its
      vector(s) to the query's, which is its ``score``, then the items with nothing indexed (no
      ``score``); the candidates are the store's hybrid search's
      best 50 (all of them for up to 50 items). ``"hybrid"``: navi-memory's hybrid search as is (its
      fused score and order, its relevance floor: an off-topic query finds nothing).
    - ``ttl``: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
      ``sweep_interval_minutes``); the TTL is kept on the item (``ttl_minutes``) and a read
      refreshes it when it asks (``refresh_ttl=True``) or by default when ``refresh_on_read`` is
      true (a config without it: false, as LangGraph's SqliteStore; no config: true). An expired item is never returned; ``sweep_ttl()`` deletes expired items now,
      ``start_ttl_sweeper()`` / ``stop_ttl_sweeper()`` do it every ``sweep_interval_minutes``
      (over an ``AsyncMemoryStore`` the three are awaited, as on LangGraph's async stores).

    ``batch`` and ``abatch`` run the same steps: ``abatch`` natively with an ``AsyncMemoryStore``,
    in a worker thread with a ``MemoryStore``; ``batch`` over an ``AsyncMemoryStore`` runs on the
    store's event loop from a worker thread (a sync tool under ``ainvoke``), and is refused in the
    loop's own thread.
    """

    supports_ttl: bool = True

    def __init__(self, store: AnyStore, *, user_id: Optional[str] = None, user_label: Optional[int] = None,
                 index: Optional[dict[str, Any]] = None, ttl: Optional[TTLConfig] = None,
                 ranking: str = "similarity") -> None:
        if ranking not in RANKINGS:
            raise ValidationError(f"ranking must be one of {', '.join(RANKINGS)}, got {ranking!r}")
        self.ranking = ranking
        self._caller = StoreCaller(store)
        self._resolver = IdentityResolver("NaviStore", user_id=user_id)
        self.user_id = self._resolver.user_id
        if user_label is not None and (isinstance(user_label, bool) or not isinstance(user_label, int)):
            raise ValidationError(f"user_label must be an int (a namespace position), got {user_label!r}")
        self.user_label = user_label
        self.index_config = self._index(index)
        self.distance_type = self._distance(index)
        # a TTL config that does not say refresh_on_read refreshes nothing unless a read asks (as
        # LangGraph's SqliteStore); without a TTL config a read refreshes (BaseStore's default)
        self.ttl_config: Optional[TTLConfig] = None if ttl is None else {"refresh_on_read": False, **ttl}
        self._sweeper: Optional[tuple[Any, Any]] = None  # (stop event or task, future or task)
        try:  # the loop an AsyncMemoryStore runs on (abatch keeps it up to date)
            self._loop: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._sweeper_lock = threading.Lock()
        self._mergers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Merger[Call, Result]] = (
            weakref.WeakKeyDictionary())

    @staticmethod
    def _index(index: Optional[dict[str, Any]]) -> Optional[list[tuple[str, Any]]]:
        if index is None:
            return None
        unknown = set(index) - {"fields", "distance_type"}
        if unknown:
            raise ValidationError(f"NaviStore index takes only 'fields' and 'distance_type' (the store's embedder "
                                  f"embeds); got {', '.join(sorted(unknown))}")
        return reading.paths(index.get("fields") or ["$"])

    @staticmethod
    def _distance(index: Optional[dict[str, Any]]) -> str:
        distance = (index or {}).get("distance_type", "cosine")
        if distance not in _fields.DISTANCES:
            raise ValidationError(f"NaviStore index distance_type must be one of {', '.join(_fields.DISTANCES)}, "
                                  f"got {distance!r}")
        return str(distance)

    # -- identity --------------------------------------------------------------------------------

    def _user(self, namespace: tuple[str, ...], prefix: bool = False) -> str:
        """The user of a call on ``namespace``: the one the run names (``runtime.context``,
        ``acting_for``, ``configurable``) or the bound one, and the namespace's user label when set;
        where both name a user it must be the same. A search ``prefix`` too short to hold the label
        leaves the run's or the bound user (a negative label counts from its end)."""
        named = self._resolver.known_user()
        if self.user_label is None:
            return self._identity(named)
        if not -len(namespace) <= self.user_label < len(namespace):
            if prefix:
                return self._identity(named)
            raise ValidationError(f"namespace {namespace!r} has no label {self.user_label} "
                                  f"(NaviStore(user_label={self.user_label}) reads the user there)")
        labelled = v.user_id(namespace[self.user_label])
        if named is not None and named != labelled:
            raise ValidationError(f"namespace label {self.user_label} names another user than this call acts for "
                                  "(its run's context or config, or the user bound to NaviStore): a call reaches "
                                  "only its own user's memory")
        return labelled

    def _calls(self, ops: Iterable[Op]) -> list[Call]:
        """Each op with the user it acts for, resolved where it was called (its run's context):
        refused ops raise here, to their own caller."""
        calls: list[Call] = []
        for op in ops:
            if isinstance(op, (GetOp, PutOp)):
                if isinstance(op, PutOp) and op.value is not None and PRIVATE in op.value:
                    raise ValidationError(f"{PRIVATE!r} is NaviStore's own key: a value cannot use it")
                calls.append((op, self._user(op.namespace)))
            elif isinstance(op, SearchOp):
                calls.append((op, self._user(op.namespace_prefix, prefix=True)))
            elif isinstance(op, ListNamespacesOp):
                prefix, _ = reading.conditions(op.match_conditions)
                # a listing prefix is open-ended: only a label counted from its start can name the user
                reaches = (self.user_label is not None and 0 <= self.user_label < len(prefix)
                           and prefix[self.user_label] != "*")
                calls.append((op, self._user(prefix) if reaches else self._identity(self._resolver.known_user())))
            else:
                raise ValidationError(f"unknown LangGraph store operation {type(op).__name__}")
        return calls

    @staticmethod
    def _identity(named: Optional[str]) -> str:
        if named is None:
            raise ValidationError("NaviStore does not know the user: run it inside a LangGraph run whose config "
                                  "has configurable.user_id (or langgraph_user_id) or whose context has user_id, "
                                  "or bind one with NaviStore(store, user_id=...)")
        return named

    # -- running ---------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The ops, run on the ``MemoryStore``; over an ``AsyncMemoryStore``, from a worker thread on
        the event loop the store runs on, together with that loop's other calls as ``abatch`` runs
        them (in the loop's own thread it would block it: refused with ``asyncio.InvalidStateError``,
        as LangGraph's async stores do)."""
        calls = self._calls(ops)
        if self._caller.sync_store is None:
            return cast("list[Result]", self._on_store_loop(self._merged(calls), "batch"))
        return self._batch_here(calls)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The ops, run on the ``AsyncMemoryStore`` (or the ``MemoryStore`` in a worker thread).
        Concurrent calls on one event loop run together (``_merge``): a ``gather`` of thousands of
        ``aget``/``aput`` is a few hundred store calls, at most ``CONCURRENT_BATCHES`` at once."""
        calls = self._calls(ops)
        if self._caller.sync_store is None:
            self._loop = asyncio.get_running_loop()
        return await self._merged(calls)

    async def _merged(self, calls: list[Call]) -> list[Result]:
        """``calls`` run with those of the other callers on this loop (coroutines and, over an
        ``AsyncMemoryStore``, blocking calls from worker threads alike)."""
        loop = asyncio.get_running_loop()
        merger = self._mergers.get(loop)
        if merger is None:
            merger = self._mergers[loop] = Merger(self._abatch_here, lanes=CONCURRENT_BATCHES, most=MERGED_OPS)
        return await merger.submit(calls)

    def sweep_ttl(self) -> Any:
        """Delete the expired keyed items of every user now (the store's ``sweep_ttl``); returns
        how many (over an ``AsyncMemoryStore``: a coroutine to await, as LangGraph's async stores).
        Expired items are never returned in any case: sweeping only frees their space."""
        if self._caller.sync_store is None:
            return self._asweep_here()
        return self._sweep_here()

    async def asweep_ttl(self) -> int:
        """``sweep_ttl``, awaited."""
        return await self._asweep_here()

    def _on_store_loop(self, work: Coroutine[Any, Any, Any], name: str) -> Any:
        """Run ``work`` (a call of the async store) on the loop the store runs on, from another thread."""
        try:
            running: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self._loop
        if running is not None and (loop is None or running is loop):
            work.close()
            raise asyncio.InvalidStateError(
                "a blocking NaviStore call (get, put, search, batch, ...) over an AsyncMemoryStore inside its event "
                "loop would block the loop: await the async one there (aget, aput, asearch, abatch, ...); blocking "
                "calls are served from worker threads")
        if loop is None or loop.is_closed() or not loop.is_running():
            work.close()
            raise ValidationError(
                f"NaviStore.{name}() over an AsyncMemoryStore needs the store's event loop running (its "
                "connections belong to it): await the async methods (aget, aput, asearch, abatch, ainvoke), or call "
                "from a worker thread while the loop runs")
        return asyncio.run_coroutine_threadsafe(work, loop).result()

    # gen_sync: NaviStore, generated by scripts/gen_sync.py from its async source: do not edit
    def _batch_here(self, calls: list[Call]) -> list[Result]:
        return self._caller.run(self._steps(calls))

    def _sweep_here(self) -> int:
        return self._caller.call(store_call.sweep_ttl())
    # gen_sync: end

    # gen_sync: source of NaviStore
    async def _abatch_here(self, calls: list[Call]) -> list[Result]:
        return await self._caller.arun(self._steps(calls))

    async def _asweep_here(self) -> int:
        return await self._caller.acall(store_call.sweep_ttl())
    # gen_sync: end

    def _steps(self, calls: list[Call]) -> Plan[list[Result]]:
        # reads first, then the puts (the last put of a key wins), as LangGraph's own stores do; a
        # read asked again (by another caller merged in) is read once
        results: list[Result] = [None] * len(calls)
        puts: dict[tuple[str, tuple[str, ...], str], tuple[PutOp, str]] = {}
        read: dict[Any, Result] = {}
        for i, (op, uid) in enumerate(calls):
            if isinstance(op, PutOp):
                puts[(uid, tuple(op.namespace), op.key)] = (op, uid)
                continue
            same = reading.read_key(op, uid)
            if same not in read:
                if isinstance(op, GetOp):
                    read[same] = yield from self._get(op, uid)
                elif isinstance(op, SearchOp):
                    read[same] = yield from self._search(op, uid)
                elif isinstance(op, ListNamespacesOp):
                    read[same] = yield from self._list_namespaces(op, uid)
            found = read[same]  # each caller its own list
            results[i] = cast(Result, list(found)) if isinstance(found, list) else found
        yield from self._put_all(list(puts.values()))
        return results

    def _get(self, op: GetOp, uid: str) -> Plan[Item | None]:
        item = yield from store_call.get_keyed(user_id=uid, namespace=op.namespace, key=op.key,
                                          refresh_ttl=bool(op.refresh_ttl))
        return None if item is None else _to_item(item)

    def _refresh(self, uid: str, found: Sequence[SearchResult | NaviItem], refresh: Optional[bool]) -> Plan[None]:
        """LangGraph's refresh on read: each item with a TTL expires its TTL from now (the store
        keeps each item's TTL; schema 6 moved the TTLs older NaviStores kept in metadata there)."""
        if refresh and found:
            yield from store_call.refresh_ttl(ids=[item.id for item in found], user_id=uid)

    def _put_all(self, puts: list[tuple[PutOp, str]]) -> Plan[None]:
        """The puts, each text of an item whose one vector cannot give LangGraph's score embedded
        first (``_fields``), in one call per user."""
        texts: dict[tuple[str, tuple[str, ...], str], list[str]] = {}
        wanted: dict[str, list[str]] = {}
        for op, uid in puts:
            if op.value is None:
                continue
            paths = self.index_config if op.index is None else None if op.index is False else reading.paths(op.index)
            texts[(uid, op.namespace, op.key)] = found = reading.indexed_texts(op.value, paths) if paths else []
            if _fields.needs_own_vectors(found, self.distance_type) and self._caller.store.embedding_model:
                wanted.setdefault(uid, []).extend(found)
        vectors: dict[tuple[str, str], tuple[str, list[float]]] = {}
        for uid, batch in wanted.items():
            for start in range(0, len(batch), EMBED_TEXTS):
                part = batch[start:start + EMBED_TEXTS]
                try:
                    made = yield from store_call.embed_texts(part, user_id=uid)
                except EmbeddingError as exc:  # kept without them: the item's own vector scores it
                    log.warning("NaviStore: embedding the index fields failed (%s); the item's own vector "
                                "scores it", exc)
                    continue
                vectors.update(((uid, text), (made.model, vec)) for text, vec in zip(part, made.vectors))
        for op, uid in puts:
            yield from self._put(op, uid, texts.get((uid, op.namespace, op.key), []), vectors)

    def _put(self, op: PutOp, uid: str, texts: list[str],
             vectors: dict[tuple[str, str], tuple[str, list[float]]]) -> Plan[None]:
        if op.value is None:
            yield from store_call.delete_keyed(user_id=uid, namespace=op.namespace, key=op.key)
            return None
        value = dict(op.value)
        text = "\n".join(texts)
        private: dict[str, Any] = {}
        if not text:
            private["index"] = False  # the content below is a stand-in, never searched
        own = [found for t in texts if (found := vectors.get((uid, t))) is not None]
        embedding = None
        if _fields.needs_own_vectors(texts, self.distance_type) and len(own) == len(texts) \
                and len({model for model, _ in own}) == 1:
            private["vectors"] = _fields.pack(own[0][0], [vec for _, vec in own])
            if len(texts) == 1 and own[0][0] == self._caller.store.embedding_model:
                embedding = own[0][1]  # the item's vector too (the same text): embedded once
        metadata = {**value, PRIVATE: private} if private else value
        yield from store_call.put_keyed(user_id=uid, namespace=op.namespace, key=op.key, content=text or op.key,
                                   metadata=metadata, ttl_minutes=None if op.ttl is None else float(op.ttl),
                                   embed=bool(text), embedding=embedding)
        return None

    def _search(self, op: SearchOp, uid: str) -> Plan[list[SearchItem]]:
        native, local = reading.filters(op.filter or {})
        prefix, filters = op.namespace_prefix or None, native or None
        query = bool(op.query) and self.index_config is not None
        similarity = query and self.ranking == "similarity"
        asked: Optional[TextVectors] = None  # the query's vector, for the items' own vectors
        if similarity and self._caller.store.embedding_model:
            try:
                asked = yield from store_call.embed_texts([cast(str, op.query)], user_id=uid, query=True)
            except EmbeddingError as exc:  # the store's search says so again and goes on by words
                log.info("NaviStore: embedding the query failed: %s", exc)
        found: Sequence[SearchResult | NaviItem]
        if query:
            # the most the store gives, then without the unindexed items (found by their key's text)
            # similarity: every item is a candidate, as in LangGraph's stores (no relevance floor)
            floor = 0.0 if self.ranking == "similarity" else None
            found = yield from store_call.search(op.query, user_id=uid, namespace_prefix=prefix, filters=filters,
                                                 limit=MAX_SEARCH, min_similarity=floor,
                                                 query_embedding=None if asked is None else asked.vectors[0])
        elif local:  # list equality is checked here: on the first LOCAL_SCAN items
            found = yield from store_call.list_items(user_id=uid, namespace_prefix=prefix, filters=filters,
                                                     limit=LOCAL_SCAN, order="updated")
        else:
            found = yield from store_call.list_items(user_id=uid, namespace_prefix=prefix, filters=filters,
                                                     limit=op.limit, offset=op.offset, order="updated")
        hits = [r for r in found if r.key is not None and (not query or _private(r).get("index", True))
                and _holds(r, local)]
        scores: dict[int, Optional[float]] = {r.id: _score(r, False) for r in hits}
        if similarity:
            scores = {r.id: self._similarity_score(r, asked) for r in hits}
            hits.sort(key=lambda r: -(scores[r.id] or 0.0))
            if len(hits) < op.offset + op.limit:  # then the items kept unindexed, unscored (as InMemoryStore)
                hits += (yield from self._unindexed(uid, prefix, native, local, op.offset + op.limit - len(hits)))
        if query or local:
            hits = hits[op.offset:op.offset + op.limit]
        yield from self._refresh(uid, hits, op.refresh_ttl)
        return [_to_search_item(r, scores.get(r.id)) for r in hits]

    @staticmethod
    def _unindexed(uid: str, prefix: Optional[tuple[str, ...]], native: dict[Any, Any],
                   local: list[tuple[tuple[str, ...], Any]], wanted: int) -> Plan[list[NaviItem]]:
        """Up to ``wanted`` of the items in scope put with nothing to index, newest first."""
        found = yield from store_call.list_items(user_id=uid, namespace_prefix=prefix,
                                                 filters={**native, (PRIVATE, "index"): False},
                                                 limit=LOCAL_SCAN if local else wanted, order="updated")
        return [r for r in found if r.key is not None and _holds(r, local)][:wanted]

    def _similarity_score(self, found: SearchResult | NaviItem, asked: Optional[TextVectors]) -> float:
        """LangGraph's score of a search result: its texts' own vectors against the query's when it
        has them (of the query's model), else its one vector's cosine."""
        own = None if asked is None else _fields.unpack(_private(found).get("vectors"), asked.model)
        if asked is None or own is None or own.shape[1] != len(asked.vectors[0]):
            return _fields.from_cosine(_similarity(found), self.distance_type)
        return _fields.best_score(np.asarray(asked.vectors[0], dtype=np.float64), own, self.distance_type)

    def _list_namespaces(self, op: ListNamespacesOp, uid: str) -> Plan[list[tuple[str, ...]]]:
        prefix, suffix = reading.conditions(op.match_conditions)
        found = yield from store_call.list_namespaces(user_id=uid, prefix=prefix or None, suffix=suffix or None,
                                                 max_depth=op.max_depth, limit=op.limit, offset=op.offset)
        return [tuple(ns) for ns in found]

    def _interval(self, sweep_interval_minutes: Optional[float]) -> float:
        minutes = sweep_interval_minutes
        if minutes is None:
            minutes = (self.ttl_config or {}).get("sweep_interval_minutes") or DEFAULT_SWEEP_MINUTES
        if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or minutes <= 0:
            raise ValidationError(f"sweep_interval_minutes must be a number of minutes above 0, got {minutes!r}")
        return float(minutes) * 60

    def start_ttl_sweeper(self, sweep_interval_minutes: Optional[float] = None) -> Any:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the ``ttl`` config's, else
        5) until ``stop_ttl_sweeper()``, as LangGraph's stores do. Over a ``MemoryStore`` the sweeps
        run in a daemon thread (returns its ``concurrent.futures.Future``); over an
        ``AsyncMemoryStore`` it returns a coroutine, as LangGraph's async stores: ``await`` it for the
        asyncio task sweeping in the running loop. A sweeper already running is returned as is. A
        failed sweep is logged and retried later."""
        seconds = self._interval(sweep_interval_minutes)
        if self._caller.sync_store is None:
            return self._start_task(seconds)
        with self._sweeper_lock:
            if self._sweeper is not None and not self._sweeper[1].done():
                return self._sweeper[1]
            stop, done = threading.Event(), concurrent.futures.Future[None]()
            threading.Thread(target=self._sweep_thread, args=(stop, seconds, done), daemon=True,
                             name="navi-memory-ttl-sweeper").start()
            self._sweeper = (stop, done)
            return done

    async def _start_task(self, seconds: float) -> "asyncio.Task[None]":
        with self._sweeper_lock:
            if self._sweeper is not None and not self._sweeper[1].done():
                return cast("asyncio.Task[None]", self._sweeper[1])
            stop = asyncio.Event()
            task = asyncio.get_running_loop().create_task(self._sweep_async(stop, seconds))
            self._sweeper = (stop, task)
            return task

    def stop_ttl_sweeper(self, timeout: Optional[float] = None) -> Any:
        """Stop the sweeper: True once it has stopped within ``timeout`` seconds (True if none ran).
        Over an ``AsyncMemoryStore`` a coroutine to await for that answer."""
        with self._sweeper_lock:
            sweeper, self._sweeper = self._sweeper, None
        if self._caller.sync_store is None:
            return self._stop_task(sweeper, timeout)
        if sweeper is None:
            return True
        stop, done = sweeper
        stop.set()
        try:
            done.result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        return True

    @staticmethod
    async def _stop_task(sweeper: Optional[tuple[Any, Any]], timeout: Optional[float]) -> bool:
        if sweeper is None:
            return True
        stop, task = sweeper
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def _sweep_thread(self, stop: threading.Event, seconds: float, done: concurrent.futures.Future[None]) -> None:
        try:
            while not stop.wait(seconds):
                self._sweep_once(self.sweep_ttl)
        finally:
            done.set_result(None)

    async def _sweep_async(self, stop: asyncio.Event, seconds: float) -> None:
        while True:
            try:
                await asyncio.wait_for(stop.wait(), seconds)
                return
            except asyncio.TimeoutError:
                pass
            try:
                swept = await self.asweep_ttl()
            except NaviMemoryError as exc:
                log.warning("TTL sweep failed (retried in the next interval): %s", exc)
            else:
                log.debug("TTL sweep deleted %d expired item(s)", swept)

    @staticmethod
    def _sweep_once(sweep: Any) -> None:
        try:
            log.debug("TTL sweep deleted %d expired item(s)", sweep())
        except NaviMemoryError as exc:  # a database hiccup must not end the sweeper
            log.warning("TTL sweep failed (retried in the next interval): %s", exc)


def _holds(item: SearchResult | NaviItem, local: list[tuple[tuple[str, ...], Any]]) -> bool:
    """Whether ``item``'s value meets the conditions the store cannot express (list equality)."""
    return all(reading.lookup(_value(item), path) == wanted for path, wanted in local)


def _similarity(found: SearchResult | NaviItem) -> float:
    """The cosine similarity of a search result's vector to the query's (0 for one without a
    vector yet, and for a listed item)."""
    return float(found.scores.get("semantic", 0.0)) if isinstance(found, SearchResult) else 0.0


def _score(found: SearchResult | NaviItem, similarity: bool) -> Optional[float]:
    """A hit's LangGraph score: its similarity (``ranking="similarity"``) or the store's score; None when listed."""
    if not isinstance(found, SearchResult):
        return None
    return _similarity(found) if similarity else float(found.score)


def _private(item: SearchResult | NaviItem) -> dict[str, Any]:
    return dict(item.metadata.get(PRIVATE) or {})


def _value(item: SearchResult | NaviItem) -> dict[str, Any]:
    return {k: val for k, val in item.metadata.items() if k != PRIVATE}


def _keyed(found: SearchResult | NaviItem) -> tuple[tuple[str, ...], str, datetime]:
    """A keyed item's namespace, key and creation time: every item NaviStore returns has them
    (``put_keyed`` wrote it; a search keeps the results with a key)."""
    if found.namespace is None or found.key is None or found.created_at is None:
        raise StorageError(f"item {found.id} is not a keyed item (no namespace, key or creation time)")
    return tuple(found.namespace), found.key, found.created_at


def _to_item(item: NaviItem) -> Item:
    namespace, key, created = _keyed(item)
    return Item(value=_value(item), key=key, namespace=namespace, created_at=created,
                updated_at=item.updated_at or created)


def _to_search_item(found: SearchResult | NaviItem, score: Optional[float] = None) -> SearchItem:
    namespace, key, created = _keyed(found)
    return SearchItem(namespace=namespace, key=key, value=_value(found), created_at=created,
                      updated_at=found.updated_at or created, score=score)
