"""One text format for timestamps in the database: fixed-width UTC, so string order is time order.

Every timestamp entering the store is made aware UTC by ``to_utc`` and must lie in ``EARLIEST`` ..
``LATEST`` (the years 1 to 9999 of Python's ``datetime``, in UTC: ``validation.when`` refuses the
rest). Stored text always has a four-digit year (``0999-06-01T...``), which ``strftime("%Y")`` does
not give on every platform. A stored value that cannot be read (written by hand, or by an older
version as ``999-06-01...``) is read leniently, or as ``UNREADABLE`` with a warning: one bad row
never makes a user unreadable.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

log = logging.getLogger(__name__)

EARLIEST = datetime.min.replace(tzinfo=timezone.utc)
LATEST = datetime.max.replace(tzinfo=timezone.utc)
UNREADABLE = EARLIEST  # what an unreadable stored timestamp reads as
_LENIENT = re.compile(r"(\d{1,4})-(\d{1,2})-(\d{1,2})[T ](\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?Z?")


def to_utc(value: datetime | str) -> datetime:
    """Aware UTC datetime from a datetime (naive = UTC) or an ISO 8601 string. Raises ValueError
    (unparseable) or OverflowError (outside the years 1 to 9999 once in UTC)."""
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def to_db(value: datetime | None) -> str | None:
    if value is None:
        return None
    return to_utc(value).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"  # year always 4 digits


def from_db(value: str | datetime | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_utc(value)
    if len(value) == 27 and value[10] == "T" and value[-1] == "Z":  # our own format: 5x faster than strptime
        try:
            return datetime.fromisoformat(value[:-1]).replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    match = _LENIENT.fullmatch(value.strip())
    try:
        if match is None:
            return to_utc(value)
        year, month, day, hour, minute, second = (int(p) for p in match.groups()[:6])
        micro = int((match.group(7) or "0").ljust(6, "0"))
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=timezone.utc)
    except (ValueError, OverflowError):
        log.warning("unreadable timestamp %r in the database: read as %s", value[:40], UNREADABLE.isoformat())
        return UNREADABLE


def in_zone(moment: datetime, tz: tzinfo | None) -> datetime:
    """``moment`` (aware; naive = UTC) as a wall-clock time in ``tz`` (None: UTC), for showing it. A moment
    at the edge of the calendar whose local time falls outside the years 1 to 9999 (0001-01-01T00:00Z in
    Los Angeles, 9999-12-31T23:30Z in Tokyo) is shown as the first or last moment of that calendar in
    ``tz`` instead of raising OverflowError: a date is shown, whatever the row holds."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    target = timezone.utc if tz is None else tz
    try:
        return aware.astimezone(target)
    except (OverflowError, ValueError):
        edge = datetime.min if aware.year < 5000 else datetime.max
        return edge.replace(tzinfo=target)


def day_text(moment: datetime) -> str:
    """``YYYY-MM-DD`` with a four-digit year (``%Y`` gives ``1-01-01`` for the year 1 on glibc)."""
    return moment.date().isoformat()


def minute_text(moment: datetime) -> str:
    """``YYYY-MM-DD HH:MM`` with a four-digit year."""
    return f"{day_text(moment)} {moment:%H:%M}"


# files of the tz database that are no zone of their own: the machine's zone, a template
_NOT_ZONES = {"localtime", "posixrules"}
MAX_ZONE_NAME = 128  # the longest IANA name has 32 characters; a longer one is no file name to look up


def zone(name: str) -> tzinfo:
    """The time zone named ``name`` (IANA, e.g. ``Europe/Lisbon``; ``UTC``); ValueError if unknown."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("a time zone is an IANA name such as 'Europe/Lisbon' or 'UTC'")
    if name.strip().upper() == "UTC":
        return timezone.utc
    unknown = ValueError(f"unknown time zone {name[:64]!r} (an IANA name such as 'Europe/Lisbon' or 'UTC')")
    if name.strip().lower() in _NOT_ZONES or len(name.strip()) > MAX_ZONE_NAME:
        raise unknown
    try:
        return ZoneInfo(name.strip())
    # no such zone, or no tz database (pip install tzdata); OSError: the name is a folder of the
    # database ("Europe") or too long a file name for the machine (tzdata reads it as a path)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise unknown from exc
