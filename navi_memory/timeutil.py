"""One text format for timestamps in the database: fixed-width UTC, so string order is time order."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def to_utc(value: datetime | str) -> datetime:
    """Aware UTC datetime from a datetime (naive = UTC) or an ISO 8601 string."""
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def to_db(value: datetime | None) -> str | None:
    return None if value is None else to_utc(value).strftime(_FORMAT)


def from_db(value: str | datetime | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_utc(value)
    if len(value) == 27 and value[10] == "T" and value[-1] == "Z":  # our own format: 5x faster than strptime
        return datetime.fromisoformat(value[:-1]).replace(tzinfo=timezone.utc)
    return datetime.strptime(value, _FORMAT).replace(tzinfo=timezone.utc)


def days_ago(now: datetime, days: float) -> datetime:
    return now - timedelta(days=days)
