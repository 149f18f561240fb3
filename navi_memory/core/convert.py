"""Backend rows (``backends.base.ItemRow``, ``FactRow``, ...; read as mappings) to the public models."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..models import EmbeddingInfo, Fact, FactVersion, Item, SearchResult
from .contract import NOT_INDEXED

SNIPPET_CHARS = 300


def snippet(content: str, size: int = SNIPPET_CHARS) -> str:
    return content if len(content) <= size else content[: size - 1].rstrip() + "…"


def item(row: Mapping[str, Any]) -> Item:
    embedding = None
    if row.get("emb_state") == "error" and row.get("emb_error") == NOT_INDEXED:  # stored so, but no failure
        embedding = EmbeddingInfo(state="skipped", model=row.get("emb_model"), updated_at=row.get("emb_updated"))
    elif row.get("emb_state"):
        embedding = EmbeddingInfo(state=row["emb_state"], model=row.get("emb_model"),
                                  dimensions=row.get("emb_dims"), error=row.get("emb_error"),
                                  updated_at=row.get("emb_updated"))
    return Item(
        id=row["id"], user_id=row["user_id"], type=row["type"], content=row["content"], theme=row["theme"],
        title=row.get("title"), tags=list(row.get("tags") or []), status=row["status"],
        pinned=bool(row.get("pinned")), source=row.get("source"), source_ref=row.get("source_ref"),
        person=row.get("person"), confidence=row.get("confidence"), observed_at=row.get("observed_at"),
        expires_at=row.get("expires_at"), created_at=row.get("created_at"), updated_at=row.get("updated_at"),
        metadata=dict(row.get("metadata") or {}), fact_id=row.get("fact_id"), embedding=embedding,
        context=row.get("context"), agent_id=row.get("agent_id"), run_id=row.get("run_id"),
        namespace=namespace_labels(row.get("namespace")), key=row.get("ext_key"),
        ttl_minutes=row.get("ttl_minutes"),
    )


def namespace_labels(stored: str | None) -> tuple[str, ...] | None:
    """A stored namespace (labels joined by '.') as its tuple of labels."""
    return None if stored is None else tuple(stored.split("."))


def fact(row: Mapping[str, Any], history: Mapping[int, Sequence[Mapping[str, Any]]] | None = None) -> Fact:
    versions = [
        FactVersion(value=h["value"], source=h["source"], confidence=h["confidence"],
                    source_context=h.get("source_context"), valid_from=h["valid_from"], valid_to=h["valid_to"],
                    source_session_id=h.get("source_session_id"), source_message_id=h.get("source_message_id"))
        for h in (history or {}).get(row["id"], [])
    ]
    fields: dict[str, Any] = {k: row.get(k) for k in Fact._field_names() if k != "history"}
    return Fact(**fields, history=versions)


def search_result(row: Mapping[str, Any], score: float, signals: dict[str, bool], scores: dict[str, float]) -> SearchResult:
    metadata = dict(row.get("metadata") or {})
    fact_ref = None
    if row.get("fact_id") is not None:
        fact_ref = {"id": row["fact_id"], **metadata.get("fact", {}), "confidence": row.get("confidence"),
                    "source": row.get("source")}
    return SearchResult(
        id=row["id"], content=row["content"], snippet=snippet(row["content"]), theme=row["theme"],
        type=row["type"], created_at=row["created_at"], score=score, signals=signals, scores=scores,
        kind="fact" if fact_ref else "item", title=row.get("title"), status=row["status"],
        pinned=bool(row.get("pinned")), person=row.get("person"), tags=list(row.get("tags") or []),
        observed_at=row.get("observed_at"), metadata=metadata, fact=fact_ref, updated_at=row.get("updated_at"),
        expires_at=row.get("expires_at"), agent_id=row.get("agent_id"), run_id=row.get("run_id"),
        namespace=namespace_labels(row.get("namespace")), key=row.get("ext_key"), user_id=row.get("user_id"),
    )


def match_all_result(row: Mapping[str, Any]) -> SearchResult:
    return search_result(row, 0.0, {"fts": False, "semantic": False, "substring": False, "context": False}, {})
