"""Keyed items (the LangGraph ``BaseStore`` model): namespaces and their match conditions, pure.

A namespace is a tuple of labels, stored as the labels joined by '.' (so a label holds no '.');
``list_namespaces`` follows ``BaseStore.list_namespaces``: prefix and suffix conditions whose
labels may be ``'*'`` (any one label), truncation to ``max_depth``, de-duplication, then paging.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import ValidationError
from . import validation as v

WILDCARD = "*"


def stored(namespace: Any, field: str = "namespace") -> str:
    """The namespace as stored: validated labels joined by '.'."""
    return ".".join(v.namespace(namespace, field))


def prefix_filter(prefix: Any) -> str | None:
    """``namespace_prefix`` of search and list_items: None, or a namespace in its stored form."""
    return None if prefix is None else stored(prefix, "namespace_prefix")


def labels(stored_namespace: str) -> tuple[str, ...]:
    return tuple(stored_namespace.split("."))


def condition(value: Any, field: str) -> tuple[str, ...] | None:
    """A prefix or suffix condition of ``list_namespaces``: None, or labels where ``'*'`` matches any one."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise ValidationError(f"{field} must be a tuple of strings")
    if not value:
        return None
    return v.namespace(value, field)


def literal_prefix(prefix: tuple[str, ...] | None) -> str | None:
    """The labels of ``prefix`` before its first wildcard, joined: what SQL can narrow by."""
    head: list[str] = []
    for label in prefix or ():
        if label == WILDCARD:
            break
        head.append(label)
    return ".".join(head) or None


def _matches(part: tuple[str, ...], condition: tuple[str, ...]) -> bool:
    return all(c == WILDCARD or c == p for c, p in zip(condition, part))


def matches(namespace: tuple[str, ...], prefix: tuple[str, ...] | None, suffix: tuple[str, ...] | None) -> bool:
    if prefix and (len(namespace) < len(prefix) or not _matches(namespace[:len(prefix)], prefix)):
        return False
    if suffix and (len(namespace) < len(suffix) or not _matches(namespace[-len(suffix):], suffix)):
        return False
    return True


def list_namespaces(stored_namespaces: Iterable[str], prefix: tuple[str, ...] | None,
                    suffix: tuple[str, ...] | None, max_depth: int | None, limit: int,
                    offset: int) -> list[tuple[str, ...]]:
    """The matching namespaces, cut to ``max_depth`` labels, distinct, sorted, one page."""
    found = set()
    for text in stored_namespaces:
        namespace = labels(text)
        if matches(namespace, prefix, suffix):
            found.add(namespace if max_depth is None else namespace[:max_depth])
    return sorted(found)[offset:offset + limit]


def like_prefix(prefix: str, escape: str = "\\") -> str:
    """A LIKE pattern matching namespaces below ``prefix`` (``prefix.``...), wildcards escaped."""
    escaped = prefix.replace(escape, escape * 2).replace("%", escape + "%").replace("_", escape + "_")
    return f"{escaped}.%"
