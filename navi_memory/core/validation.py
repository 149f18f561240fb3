"""Input checks shared by every entry point. Each failure is a ``ValidationError`` naming the field."""

from __future__ import annotations

import codecs
import json
import math
import re
import unicodedata
from datetime import datetime, timedelta
from typing import Any, Iterable

from ..errors import ValidationError
from .timeutil import EARLIEST, to_utc, zone

MAX_LIMIT = 50
MAX_USER_ID = 256
MAX_TITLE = 512
MAX_KEY = 256
MAX_TAGS = 32
MAX_TAG = 64
MAX_SLUG = 64
MAX_OFFSET = 2**63 - 1
_SLUG_SEP = re.compile(r"[\W_]+", re.UNICODE)


def text(value: Any, field: str, max_bytes: int, allow_empty: bool = False, strip: bool = True) -> str:
    """A str without NUL bytes, valid UTF-8, at most ``max_bytes`` bytes; stripped of outer space
    unless ``strip`` is False."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{field} is not valid UTF-8") from exc
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ValidationError(f"{field} contains a NUL byte")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{field} is not valid UTF-8 (lone surrogate)") from exc
    if size > max_bytes:
        raise ValidationError(f"{field} is {size} bytes, more than the maximum of {max_bytes}")
    checked: str = value.strip() if strip else value
    if not checked and not allow_empty:
        raise ValidationError(f"{field} is empty")
    return checked


def optional_text(value: Any, field: str, max_bytes: int) -> str | None:
    if value is None:
        return None
    result = text(value, field, max_bytes, allow_empty=True)
    return result or None


def user_id(value: Any) -> str:
    """A user id is kept byte for byte, or refused: never trimmed or normalised, so ``"alice "``
    can neither read nor write ``alice``. Refused: empty, over 256 UTF-8 bytes, leading or trailing
    whitespace (any Unicode space: U+00A0, U+3000, U+0085 ...), control characters (Unicode Cc:
    tab, newline, NUL ...) and invisible format characters (Cf: U+200B, U+FEFF, bidi marks ...)."""
    if value is None:
        raise ValidationError("user_id is required (pass all_users=True for an admin read across users)")
    return _exact_id(value, "user_id")


def _exact_id(value: Any, field: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    uid = text(value, field, MAX_USER_ID, strip=False)
    if not uid.strip():
        raise ValidationError(f"{field} is empty")
    if uid != uid.strip():
        raise ValidationError(f"{field} {uid!r} has leading or trailing whitespace")
    odd = next((ch for ch in uid if unicodedata.category(ch) in ("Cc", "Cf")), None)
    if odd is not None:
        kind = "control" if unicodedata.category(odd) == "Cc" else "invisible format"
        raise ValidationError(f"{field} {uid!r} contains the {kind} character U+{ord(odd):04X}")
    return uid


def scope_id(value: Any, field: str) -> str | None:
    """An ``agent_id`` or ``run_id``: None (no scope), or kept exactly like a user id (1-256
    UTF-8 bytes, no outer whitespace, no control or invisible format characters)."""
    return None if value is None else _exact_id(value, field)


def namespace(value: Any, field: str = "namespace") -> tuple[str, ...]:
    """A keyed item's namespace: a non-empty tuple (or list) of labels, each a non-empty string
    without '.' (the labels are stored joined by '.'), at most 256 bytes in all."""
    if isinstance(value, str) or not isinstance(value, (tuple, list)) or not value:
        raise ValidationError(f"{field} must be a non-empty tuple of strings")
    labels = []
    for label in value:
        if not isinstance(label, str):
            raise ValidationError(f"{field} labels must be strings, got {type(label).__name__}")
        if not label or "." in label:
            raise ValidationError(f"{field} label {label!r} is empty or contains '.'")
        labels.append(text(label, field, MAX_KEY, strip=False))
    if len(".".join(labels).encode("utf-8")) > MAX_KEY:
        raise ValidationError(f"{field} is longer than {MAX_KEY} bytes")
    return tuple(labels)


def choice(value: Any, field: str, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(f"invalid {field} {value!r}: expected one of {', '.join(allowed)}")
    return value


def timezone_name(value: Any, field: str = "timezone") -> str:
    """An IANA time zone this machine knows (``Europe/Lisbon``), as given without surrounding
    blanks; any spelling of UTC as ``UTC``."""
    try:
        zone(value)
    except ValueError as exc:
        raise ValidationError(f"{field}: {exc}") from exc
    name = value.strip()
    return "UTC" if name.upper() == "UTC" else name


MAX_LOCALE = 64
_LOCALE_PART = re.compile(r"[A-Za-z0-9]{1,8}")


def locale_tag(value: Any, field: str = "locale") -> str:
    """A BCP 47 language tag (``en-US``, ``pt_br``, ``zh-Hant-TW``) in its usual case, ``_`` read as ``-``:
    language lower case, a 4-letter script title case, a 2-letter or 3-digit region upper case."""
    parts = text(value, field, MAX_LOCALE).replace("_", "-").split("-")
    if not (parts[0].isascii() and parts[0].isalpha() and 2 <= len(parts[0]) <= 8) or not all(
            _LOCALE_PART.fullmatch(p) for p in parts[1:]):
        raise ValidationError(f"{field} {value!r} is not a language tag such as en-US")
    out = [parts[0].lower()]
    for part in parts[1:]:
        if len(part) == 4 and part.isalpha() and len(out) == 1:
            out.append(part.title())
        elif (len(part) == 2 and part.isalpha()) or (len(part) == 3 and part.isdigit()):
            out.append(part.upper())
        else:
            out.append(part.lower())
    return "-".join(out)


def limit(value: Any, maximum: int = MAX_LIMIT, field: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer")
    if value <= 0 or value > maximum:
        raise ValidationError(f"{field} must be between 1 and {maximum}, got {value}")
    return value


def rate(value: Any, field: str) -> float:
    """A positive, finite rate (things per second)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValidationError(f"{field} must be a positive number")
    return float(value)


def offset(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError("offset must be a non-negative integer")
    if value > MAX_OFFSET:  # beyond a 64-bit integer the database drivers overflow
        raise ValidationError(f"offset must be at most {MAX_OFFSET}")
    return value


def item_id(value: Any) -> int:
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = integer_text(value.strip(), "id")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value >= 2**63:
        raise ValidationError(f"invalid id {shown(value)}: ids are positive integers")
    return value


def confidence(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise ValidationError(f"confidence must be an integer from 0 to 100, got {value!r}")
    return value


def slug(value: Any, field: str = "theme") -> str:
    """Normalise a theme name to a slug: lower case, words joined by '-'."""
    raw = text(value, field, 4 * MAX_SLUG)
    result = _SLUG_SEP.sub("-", raw.lower()).strip("-")[:MAX_SLUG].strip("-")
    if not result:
        raise ValidationError(f"{field} {value!r} has no letters or digits")
    return result


def flag(value: Any, field: str) -> bool:
    """A real bool: the string "false" from a tool call must not count as true."""
    if not isinstance(value, bool):
        raise ValidationError(f"{field} must be true or false, got {value!r}")
    return value


def names(value: Any, field: str, max_bytes: int = MAX_KEY) -> tuple[str, ...]:
    """One name or a list of names (a bare string is one name, not its characters)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValidationError(f"{field} must be a string or a list of strings")
    return tuple(text(item, field, max_bytes) for item in value)


def tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValidationError("tags must be a list of strings")
    out: dict[str, None] = {}
    for tag in value:
        out.setdefault(text(tag, "tag", MAX_TAG), None)
    if len(out) > MAX_TAGS:
        raise ValidationError(f"at most {MAX_TAGS} tags")
    return tuple(out)


def when(value: Any, field: str) -> datetime | None:
    """Every timestamp entering the store: aware UTC, from a datetime (naive = UTC) or an ISO 8601
    string, within 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999Z once converted to UTC."""
    if value is None:
        return None
    if not isinstance(value, (datetime, str)):
        raise ValidationError(f"{field} must be a datetime or ISO 8601 string")
    try:
        return to_utc(value)
    except OverflowError as exc:
        raise ValidationError(f"{field} {value!r} is outside 0001-01-01 .. 9999-12-31 in UTC") from exc
    except ValueError as exc:
        raise ValidationError(f"{field} is not an ISO 8601 date/time: {value!r}") from exc


def days(value: Any, field: str, *, unit: str = "days", most: float = 365_000) -> float | None:
    """``value`` as a float: a span of time in ``unit`` (at most ``most``; None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValidationError(f"{field} must be a non-negative number of {unit}")
    if value > most:
        raise ValidationError(f"{field} is too large")
    return float(value)


def days_from(now: datetime, value: Any, field: str, *, back: bool = False) -> datetime | None:
    """The one way a number of days becomes a timestamp: ``now`` plus (or, with ``back``, minus)
    ``value`` days, checked by ``days``. A later time past 9999-12-31 in UTC is a ``ValidationError``
    (it could not be stored); an earlier one before the year 1 is a lower bound that excludes
    nothing, so it is ``EARLIEST``."""
    span = days(value, field)
    if span is None:
        return None
    try:
        return now - timedelta(days=span) if back else now + timedelta(days=span)
    except OverflowError as exc:
        if back:
            return EARLIEST
        raise ValidationError(f"{field} {value!r} from {now.isoformat()} is past 9999-12-31 in UTC") from exc


def expiry(expires_at: Any, expires_days: Any, now: datetime) -> datetime | None:
    if expires_at is not None and expires_days is not None:
        raise ValidationError("give expires_at or expires_days, not both")
    if expires_days is not None:
        return days_from(now, expires_days, "expires_days")
    return when(expires_at, "expires_at")


def mapping(value: Any, field: str, max_bytes: int = 32 * 1024) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValidationError(f"{field} must be a dict with string keys")
    try:
        encoded = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{field} must be JSON-serialisable: {exc}") from exc
    if len(encoded.encode("utf-8")) > max_bytes:
        raise ValidationError(f"{field} is larger than {max_bytes} bytes as JSON")
    _storable_strings(value, field)
    return value


def _storable_strings(value: Any, field: str) -> None:
    """Every key and string in ``value`` storable on both databases: ``json.dumps`` escapes a NUL
    and a lone surrogate, so SQLite would keep them while PostgreSQL's jsonb refuses them."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
        elif isinstance(node, str) and (problem := unstorable(node)):
            raise ValidationError(f"{field} holds a string with {problem}")


def unstorable(value: str) -> str | None:
    """What no database stores alike in ``value`` (a NUL byte, a lone surrogate), or None."""
    if "\x00" in value:
        return "a NUL byte"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "a lone surrogate (not valid UTF-8)"
    return None


class _RepeatedKey(ValueError):
    pass


def _one_of_each_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return value


def parse_json(text: str | bytes, what: str) -> Any:
    """Untrusted JSON (a file, a request body, an import line): every way it can fail is a
    ``ValidationError`` naming ``what``: bad syntax, bytes that are not UTF-8, nesting deeper than
    the parser goes, an integer over Python's 4,300-digit conversion limit, a key twice in one
    object (parsers disagree on which value counts: a check that read the first ``user_id`` must
    not be followed by a write under the last)."""
    try:
        return json.loads(text, object_pairs_hook=_one_of_each_key)
    except _RepeatedKey as exc:
        raise ValidationError(f"{what} is not JSON this accepts: the key {str(exc)[:100]!r} appears twice in one"
                              " object") from exc
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{what} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{what} is not JSON: not UTF-8 text (byte {exc.start})") from exc
    except RecursionError as exc:
        raise ValidationError(f"{what} is not JSON this accepts: nested too deeply") from exc
    except ValueError as exc:  # int("9" * 5000): Python's limit on integer string conversion
        raise ValidationError(f"{what} is not JSON this accepts: a number too long to read"
                              f" ({str(exc).split(':')[0]})") from exc


MAX_DEPTH = 32  # levels of dicts and lists in metadata, source_ref and tool-call arguments
MAX_INT_DIGITS = 19  # 2**63 - 1, the largest id or offset the databases take, has 19 digits


def shown(value: Any, size: int = 40) -> str:
    """``repr(value)`` for an error message, shortened: a 5,000-character input is not echoed back."""
    text_ = repr(value)
    if len(text_) <= size:
        return text_
    length = f" ({len(value)} characters)" if isinstance(value, (str, bytes)) else ""
    return f"{text_[:size]}…{length}"


def depth(value: Any, field: str, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` unchanged when its dicts and lists nest ``max_depth`` levels at most. Walked with a
    stack, not recursion: a structure 20,000 levels deep (or one containing itself) is refused with
    a ``ValidationError`` instead of a ``RecursionError`` in ``json.dumps`` here or on every later read."""
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Iterable[Any] = node.values()
        elif isinstance(node, (list, tuple, set, frozenset)):
            children = node
        else:
            continue
        if level > max_depth:
            raise ValidationError(f"{field} is nested more than {max_depth} levels deep")
        stack.extend((child, level + 1) for child in children)
    return value


def nested_mapping(value: Any, field: str, max_bytes: int = 32 * 1024) -> dict[str, Any] | None:
    """``mapping`` for a dict a caller writes (metadata, source_ref): nesting capped by ``depth`` first."""
    return mapping(depth(value, field), field, max_bytes)


def integer_text(raw: Any, field: str) -> int:
    """An integer a person typed (a CLI argument, a URL path or query parameter): ASCII digits with
    an optional sign, at most 19 of them. Everything else is a ``ValidationError``: ``int()`` alone
    would take "1_0", "١٢" or " 12 ", and raise a ValueError with a long message past 4,300 digits."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if not isinstance(raw, str):
        raise ValidationError(f"{field} must be an integer, got {type(raw).__name__}")
    digits = raw[1:] if raw[:1] in "+-" else raw
    if not (digits.isascii() and digits.isdigit()):
        raise ValidationError(f"{field} must be an integer, got {shown(raw)}")
    if len(digits.lstrip("0")) > MAX_INT_DIGITS:
        raise ValidationError(f"{field} must be an integer of at most {MAX_INT_DIGITS} digits,"
                              f" got one of {len(digits)} digits")
    return int(raw)


def utf8_text(data: bytes, what: str) -> str:
    """``data`` decoded, or a ``ValidationError`` naming ``what`` (a file) and the line and column of
    the first byte that is not UTF-8, so a person can find it in their editor. A leading byte order
    mark (Windows editors write one) is dropped, as editors do not show it."""
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ValidationError(f"{what} line {line} column {column}: not UTF-8 text"
                              f" (byte 0x{data[exc.start]:02x})") from exc
