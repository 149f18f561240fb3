"""Metadata filters, pure: validation into conditions, and their meaning as a Python function.

A filter is a mapping over item ``metadata``: ``{"k": value}`` (equality) or ``{"k": {"$op":
value, ...}}`` with the operators below, written with or without the leading ``$`` (LangGraph
writes ``$eq``, mem0 ``eq``). Several keys, and several operators of one key, must all hold.
A dotted key ``a.b`` names both ``metadata["a"]["b"]`` (through objects only, never into lists) and
the key ``"a.b"`` itself, as LangGraph's stores read it (its SqliteStore the first, its InMemoryStore
and PostgresStore the second): a condition holds when it holds at either (a negated one, ``ne``,
``nin``, ``exists: false``, when it holds at both). A tuple key is one path exactly: ``("a.b",)`` the
key ``"a.b"``, ``("a", "b")`` the nested one.

Meaning (``evaluate``; both backends compile the same, ``tests/test_metadata_filters.py``):
``eq`` holds when the value is there and equal, of the same JSON type (numbers compare as
numbers, so 1 equals 1.0, but never ``true``); ``in`` when it equals one of the list;
``ne`` / ``nin`` are their negations (a missing value is ``ne`` anything); ``gt`` / ``gte`` / ``lt`` /
``lte`` compare a number with a number or a string with a string (code point order), anything else
does not match; ``exists: true`` holds when the key is there (even with a JSON null). Operands the
databases cannot compare mean what they mean in Python: ``lt inf`` holds for every number, ``gt inf``
and ``eq nan`` for none, ``ne nan`` for every value; a string with a NUL equals nothing stored.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

from ..errors import ValidationError

# a filter: keys are dotted paths, or tuples of labels (a mapping of one kind of key or the other)
MetadataFilter = Union[Mapping[str, Any], Mapping[tuple[str, ...], Any]]

OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists")
MAX_CONDITIONS = 64
MAX_LIST = 256
_MISSING = object()


@dataclass(frozen=True)
class Condition:
    """One checked condition: the path of object keys, the operator (no ``$``), its operand;
    ``also``: the other paths its key names (a dotted key's literal one), where it may hold instead."""

    path: tuple[str, ...]
    op: str
    value: Any
    also: tuple[tuple[str, ...], ...] = ()

    @property
    def negated(self) -> bool:
        """Whether it holds where the value is not (then at every path, else at any)."""
        return self.op in ("ne", "nin") or (self.op == "exists" and not self.value)

    def at_each_path(self) -> tuple["Condition", ...]:
        """The condition once per path its key names (the same condition when it names one)."""
        if not self.also:
            return (self,)
        return tuple(Condition(path, self.op, self.value) for path in (self.path, *self.also))


INT64 = 2**63 - 1
INT64_MIN = -(2**63)


def _scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return INT64_MIN <= value <= INT64  # what both databases hold
    return isinstance(value, (str, bool))


def _path(key: Any) -> tuple[str, ...]:
    if isinstance(key, tuple) and key and all(isinstance(part, str) for part in key):
        parts = key  # the path itself: its labels may hold dots
    elif isinstance(key, str) and key:
        parts = tuple(key.split("."))
    else:
        raise ValidationError(f"metadata filter key {key!r} must be a non-empty string (or a tuple of labels)")
    if not all(parts) or any(ch in '"\\' or ord(ch) < 32 for part in parts for ch in part):
        raise ValidationError(f"Invalid filter key {key!r}: a metadata filter key has no empty part, quote, "
                              "backslash or control character")
    return parts


def _number_hint(values: Any) -> str:
    """Why a number among ``values`` is not a filter operand (it looks like one), or ''."""
    for value in values:
        if isinstance(value, float) and not math.isfinite(value):
            return ": numbers must be finite"
        if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64:
            return ": integers must fit in 64 bits, as both databases store them"
    return ""


def _operand(key: str, op: str, value: Any) -> Any:
    wrong = f"metadata filter {key!r} ${op}"
    if op == "exists":
        if not isinstance(value, bool):
            raise ValidationError(f"{wrong} takes true or false, got {value!r}")
    elif op in ("in", "nin"):
        if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= MAX_LIST or not all(map(_scalar, value)):
            hint = _number_hint(value) if isinstance(value, (list, tuple)) else ""
            raise ValidationError(f"{wrong} takes a list of 1 to {MAX_LIST} strings, numbers or booleans{hint}")
        value = tuple(value)
    elif op in ("gt", "gte", "lt", "lte"):
        if isinstance(value, bool) or not _scalar(value):
            raise ValidationError(f"{wrong} takes a number or a string, got {value!r}")
    elif not _scalar(value):
        raise ValidationError(f"{wrong} takes a string, a number or a boolean, got {value!r}{_number_hint([value])}")
    return value


LARGEST = sys.float_info.max
RANGE = ("gt", "gte", "lt", "lte")


def _unmatchable(value: Any) -> bool:
    """A value no stored one equals: NaN, or a string with a NUL (which neither database stores)."""
    return (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and "\x00" in value)


def _beyond(key: str, path: tuple[str, ...], op: str, value: Any) -> tuple[Condition, ...] | None:
    """An operand the databases cannot compare (NaN, a NUL, an infinity, a number past a double
    or an int64) as the conditions meaning the same, as in Python and LangGraph's stores: ``lt inf``
    holds for every number, ``eq nan`` for nothing, ``ne nan`` for everything. None: not such an operand."""
    never = (Condition(path, "exists", True), Condition(path, "exists", False))
    if op in ("eq", "ne") and _unmatchable(value):
        return never if op == "eq" else ()
    if op in ("in", "nin") and isinstance(value, (list, tuple)) and any(map(_unmatchable, value)):
        kept = [item for item in value if not _unmatchable(item)]
        if not kept:
            return never if op == "in" else ()
        return (Condition(path, op, _operand(key, op, kept)),)
    if op not in RANGE or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and math.isnan(value):
        return never
    if isinstance(value, int) and not INT64_MIN <= value <= INT64 and abs(value) <= LARGEST:
        return (Condition(path, op, float(value)),)
    if -LARGEST <= value <= LARGEST:
        return None
    if (op in ("lt", "lte")) == (value > 0):  # below +inf or above -inf: every number
        return (Condition(path, "gte", -LARGEST),) if value > 0 else (Condition(path, "lte", LARGEST),)
    return never


def conditions(filters: Any) -> tuple[Condition, ...]:
    """The conditions of a filter mapping (None or empty: none); ``ValidationError`` names the
    key and the operator of the first bad one."""
    if filters is None:
        return ()
    if not isinstance(filters, Mapping):
        raise ValidationError(f"filters must be a mapping of metadata keys, got {type(filters).__name__}")
    out: list[Condition] = []
    for key, spec in filters.items():
        path = _path(key)
        ops = spec if isinstance(spec, Mapping) else {"eq": spec}
        if not ops:
            raise ValidationError(f"metadata filter {key!r} has no operator")
        for raw, operand in ops.items():
            op = raw[1:] if isinstance(raw, str) and raw.startswith("$") else raw
            if op not in OPERATORS:
                raise ValidationError(f"metadata filter {key!r}: unknown operator {raw!r}"
                                      f" (known: {', '.join(OPERATORS)}, with or without '$')")
            special = _beyond(key, path, op, operand)
            found = special if special is not None else [Condition(path, op, _operand(key, op, operand))]
            also = ((key,),) if isinstance(key, str) and len(path) > 1 else ()
            out.extend(Condition(c.path, c.op, c.value, also) for c in found)
    if len(out) > MAX_CONDITIONS:
        raise ValidationError(f"at most {MAX_CONDITIONS} metadata conditions")
    return tuple(out)


def lookup(metadata: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` through objects, or ``_MISSING``."""
    value = metadata
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def json_type(value: Any) -> str:
    """``number``, ``string``, ``boolean`` or ``other`` (null, list, object)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else "other"


def _equal(found: Any, wanted: Any) -> bool:
    return found is not _MISSING and json_type(found) == json_type(wanted) and found == wanted


def at_each_path_sql(c: Condition, one: Callable[[Condition], tuple[str, list[Any]]]) -> tuple[str, list[Any]]:
    """A backend's SQL of ``c`` (``one`` compiles a condition of one path): at each path its key
    names, joined by AND for a negated condition, else by OR."""
    if not c.also:
        return one(c)
    parts = [one(each) for each in c.at_each_path()]
    return ("(" + (" AND " if c.negated else " OR ").join(text for text, _ in parts) + ")",
            [param for _, params in parts for param in params])


def holds(condition: Condition, metadata: Any) -> bool:
    if condition.also:
        each = (holds(one, metadata) for one in condition.at_each_path())
        return all(each) if condition.negated else any(each)
    found = lookup(metadata, condition.path)
    op, wanted = condition.op, condition.value
    if op == "exists":
        return (found is not _MISSING) is wanted
    if op in ("eq", "ne"):
        return _equal(found, wanted) is (op == "eq")
    if op in ("in", "nin"):
        return any(_equal(found, w) for w in wanted) is (op == "in")
    if found is _MISSING or json_type(found) != json_type(wanted):
        return False
    compared: dict[str, bool] = {"gt": found > wanted, "gte": found >= wanted, "lt": found < wanted,
                                 "lte": found <= wanted}
    return compared[op]


def evaluate(conds: tuple[Condition, ...], metadata: Any) -> bool:
    """Whether ``metadata`` passes every condition: the reference both SQL compilations follow."""
    return all(holds(c, metadata) for c in conds)
