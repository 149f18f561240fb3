"""Keeping the vectors whole: their counts, filling in what is missing (``backfill``), embedding
everything again (``rebuild_embeddings``), and moving the store to a new model without downtime
(``reembed``).

A move keeps every search on one model. The store is opened with the new model's embeddings and
``previous_embeddings`` naming the old one; ``reembed`` then goes user by user: it embeds each of
the user's items with the new model into ``next_embeddings`` (a throttled background job, resumable
since what is done is in the database), and when the user has a new vector for every item,
``cut_over`` swaps them in, in one transaction. Until then the user's searches (and writes) use the
old model and its vectors; afterwards the new one. So a search never finds nothing while vectors are
being rebuilt, and never ranks cosines of two models against each other.
"""

from __future__ import annotations

import logging
from time import monotonic
from typing import Any, Callable, Sequence

from ..calls import EmbedDocuments, EmbedQuery, Pause, db
from ..core import validation as v
from ..errors import EmbeddingError, ValidationError
from ..models import BackfillReport, ReembedReport, TextVectors
from ..sansio import Op, operation
from .memory import MemoryOperations
from .shared import EMBED_BATCH, Shared

log = logging.getLogger("navi_memory")

MOVE_PASSES = 3  # embed-then-switch rounds per user before leaving one still being written to the next run
USERS_PAGE = 100
MAX_TEXTS = 256  # texts one embed_texts call embeds


class EmbeddingOperations:
    """The embedding job and its status."""

    def __init__(self, shared: Shared, memory: MemoryOperations) -> None:
        self._shared = shared
        self._memory = memory

    def _require_embedder(self, what: str) -> str:
        if self._shared.embedder is None or self._shared.model is None:
            raise ValidationError(f"no embedding provider configured: nothing to {what} with")
        return self._shared.model

    def _remaining(self, stats: dict[str, Any]) -> int:
        """Items without a ready vector of the model their user's searches read."""
        return stats["items"] - stats["ready"] - stats["skipped"] - stats.get("previous_ready", 0)

    @operation
    def embedding_status(self) -> Op[dict[str, Any]]:
        """Counts of ready / pending / error / missing / other-model embeddings, and of items
        stored with ``embed=False`` (``skipped``: never embedded, not a failure). While the store
        moves to a new model (``previous_embeddings``): the old model's vectors by state
        (``previous_ready``, ...), and the users moved and still to move (``reembed``)."""
        model, previous = self._shared.model, self._shared.previous_model
        stats = yield db.embedding_stats(model=model, previous=previous)
        out: dict[str, Any] = {"model": model, **stats}
        if previous is not None and model is not None:
            out["previous_model"] = previous
            out.update((yield db.reembed_progress(model=model)))
        return out

    @operation
    def embed_texts(self, texts: Sequence[str], *, user_id: str, query: bool = False) -> Op[TextVectors]:
        """The vectors of ``texts`` (at most 256) by the model ``user_id``'s searches read, with
        that model's name: for a caller that scores texts of its own against a query (NaviStore's
        per-field vectors). ``query=True`` embeds them as search queries. ``EmbeddingError`` when
        the provider fails; ``ValidationError`` without an embedding provider."""
        self._require_embedder("embed")
        uid = v.user_id(user_id)
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise ValidationError("texts must be a list of strings")
        if len(texts) > MAX_TEXTS:
            raise ValidationError(f"embed_texts takes at most {MAX_TEXTS} texts, got {len(texts)}")
        batch = [v.text(t, "text", self._shared.max_content_bytes, strip=False) for t in texts]
        model = (yield from self._memory.serving_model(uid)) or self._shared.require_model()
        if v.flag(query, "query"):
            vectors = []
            for one in batch:
                vectors.append((yield EmbedQuery(one, model)))
        else:
            vectors = (yield EmbedDocuments(batch, model=model)) if batch else []
        return TextVectors(model=model, vectors=[[float(x) for x in vec] for vec in vectors])

    @operation
    def backfill(self, *, user_id: str | None = None, batch_size: int = EMBED_BATCH,
                 progress: Callable[[int, int], None] | None = None) -> Op[BackfillReport]:
        """Embed every row without a ready vector of the active model (pending, error, other model).
        While the store moves to a new model: of the model each user's searches read."""
        model = self._require_embedder("backfill")
        uid = None if user_id is None else v.user_id(user_id)
        batch_size = v.limit(batch_size, 10_000, "batch_size")
        previous = self._shared.previous_model
        todo = self._remaining((yield db.embedding_stats(model=model, previous=previous)))
        report = BackfillReport()
        report.embedded, report.failed = yield from self._memory.embed_pending(
            uid, batch_size, None if progress is None else lambda done: progress(done, todo))
        report.remaining = self._remaining((yield db.embedding_stats(model=model, previous=previous)))
        return report

    @operation
    def rebuild_embeddings(self, *, user_id: str | None = None, batch_size: int = EMBED_BATCH,
                           progress: Callable[[int, int], None] | None = None) -> Op[BackfillReport]:
        """Mark every vector pending and embed all rows again. Semantic search finds nothing until
        each row is done: to change the model, ``reembed`` keeps searches whole instead."""
        self._require_embedder("rebuild")
        yield db.reset_embeddings(user_id=None if user_id is None else v.user_id(user_id), now=self._shared.now())
        return (yield from self.backfill(user_id=user_id, batch_size=batch_size, progress=progress))

    @operation
    def reembed(self, *, user_id: str | None = None, batch_size: int = EMBED_BATCH,
                items_per_second: float | None = None, max_users: int | None = None,
                progress: Callable[[ReembedReport], None] | None = None) -> Op[ReembedReport]:
        """Move the stored vectors to the store's model, user by user, with no pause in search: each
        user's searches read the old model's vectors until all of that user's new ones are made,
        then the new ones (one transaction swaps them). Needs the store opened with
        ``previous_embeddings`` (the old model). Resumable (a run picks up where one stopped);
        ``items_per_second`` throttles the embedding calls, ``max_users`` ends the run after that
        many users, ``progress(report)`` follows each user. Stops early when the provider fails a
        whole batch. ``complete`` once every user is on the new model: then open the store without
        ``previous_embeddings``."""
        model, previous = self._require_embedder("re-embed"), self._shared.previous_model
        if previous is None:
            raise ValidationError("no model to move from: open the store with previous_embeddings= (or"
                                  " NAVI_MEMORY_PREVIOUS_EMBEDDINGS) naming the model the vectors were made with")
        batch_size = v.limit(batch_size, 10_000, "batch_size")
        rate = None if items_per_second is None else v.rate(items_per_second, "items_per_second")
        budget = None if max_users is None else v.limit(max_users, 1 << 31, "max_users")
        report = ReembedReport(model=model, previous_model=previous)
        chosen = None if user_id is None else [v.user_id(user_id)]
        after, stopped = "", False
        while not stopped and budget != 0:
            users = chosen if chosen is not None else (yield db.users_to_move(model=model, after=after,
                                                                              limit=USERS_PAGE))
            if not users:
                break
            for uid in users:
                moved = yield from self._move_user(uid, model, batch_size, rate, report)
                if moved is None:  # the provider fails: later users would fail the same way
                    stopped = True
                    break
                report.users_moved += moved
                budget = None if budget is None else budget - 1
                if progress is not None:
                    progress(report)
                if budget == 0:
                    break
            if chosen is not None:
                break
            after = users[-1]
        report.users_remaining = (yield db.reembed_progress(model=model))["users_to_move"]
        report.complete = report.users_remaining == 0
        return report

    def _move_user(self, user_id: str, model: str, batch_size: int, rate: float | None,
                   report: ReembedReport) -> Op[int | None]:
        """Embed the user's items still without a waiting vector of ``model``, then switch the user;
        1 when switched, 0 when writes kept adding items (left to the next run), None when the
        provider failed."""
        embedder = self._shared.embedder
        assert embedder is not None
        embedder.reset_backoff()  # an explicit job always tries the provider
        for _ in range(MOVE_PASSES):
            after = 0
            while rows := (yield db.pending_next(model=model, user_id=user_id, limit=batch_size, after_id=after)):
                after, started = rows[-1][0], monotonic()
                try:
                    vectors = yield EmbedDocuments([text for _, _, text in rows], model=model)
                except EmbeddingError as exc:
                    log.warning("re-embedding stopped at user %s: the provider failed (%s)", user_id, exc)
                    report.failed += len(rows)
                    return None
                report.embedded += yield db.store_next_embeddings(
                    model=model, results=[(i, u, t, vec) for (i, u, t), vec in zip(rows, vectors)],
                    now=self._shared.now())
                if rate is not None:
                    wait = len(rows) / rate - (monotonic() - started)
                    if wait > 0:
                        yield Pause(wait)
                        report.paused_seconds += wait
            if (yield db.cut_over(user_id=user_id, model=model, now=self._shared.now())):
                return 1
        log.info("user %s kept changing while re-embedding: left for the next run", user_id)
        return 0
