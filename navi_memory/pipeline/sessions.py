"""Conversation messages in, as OpenAI and LangChain write them; sessions and messages out.

``normalize_messages`` accepts dicts in the OpenAI chat format (``role``, ``content``,
``tool_calls[].function.{name, arguments}``, ``tool_call_id``), LangChain message dicts or
objects (``type`` human/ai/system/tool, ``tool_calls[].{name, args, id}``) and LangChain's
serialised form (``{"type": ..., "data": {...}}``). Pure functions: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Iterable

from ..core import validation as v
from ..errors import ValidationError
from ..models import Message, Session, ToolCall

ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "system": "system",
         "developer": "system", "tool": "tool", "function": "tool"}
MAX_MESSAGES = 10_000
MAX_ARGUMENT_BYTES = 64 * 1024


def _fields(raw: Any) -> dict[str, Any]:
    """The message as a plain dict, whatever shape it came in."""
    if isinstance(raw, Mapping):
        if "data" in raw and isinstance(raw["data"], Mapping) and "role" not in raw:
            return {"type": raw.get("type"), **raw["data"]}  # LangChain's message_to_dict
        return dict(raw)
    if hasattr(raw, "content") and hasattr(raw, "type"):  # a LangChain BaseMessage
        extra = getattr(raw, "additional_kwargs", None) or {}
        return {"type": raw.type, "content": raw.content, "tool_calls": getattr(raw, "tool_calls", None) or
                extra.get("tool_calls"), "tool_call_id": getattr(raw, "tool_call_id", None),
                "name": getattr(raw, "name", None)}
    raise ValidationError(f"a message must be a mapping or a LangChain message, got {type(raw).__name__}")


def _content(value: Any, where: str, max_bytes: int) -> str:
    if value is None:
        return ""
    if isinstance(value, list):  # content parts: keep the text ones
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        value = "\n".join(parts)
    return v.text(value, f"{where} content", max_bytes, allow_empty=True)


def _tool_call(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{where}: a tool call must be a mapping")
    nested = raw.get("function")
    function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else {}
    name = raw.get("name") or function.get("name")
    args = raw["args"] if "args" in raw else function.get("arguments", raw.get("arguments", ""))
    if not isinstance(args, str):
        v.depth(args, f"{where} tool call arguments")  # json.dumps would hit a RecursionError
        try:
            args = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"{where}: tool call arguments are not JSON-serialisable") from exc
    call_id = raw.get("id")
    return {"id": None if call_id in (None, "") else v.text(str(call_id), f"{where} tool call id", v.MAX_KEY),
            "name": v.text(name if isinstance(name, str) else "", f"{where} tool call name", v.MAX_KEY),
            "arguments": v.text(args, f"{where} tool call arguments", MAX_ARGUMENT_BYTES, allow_empty=True)}


def normalize_message(raw: Any, index: int, max_bytes: int) -> dict[str, Any]:
    """One message as the backend stores it: role, content, name, tool_calls, tool_call_id, created_at."""
    where = f"message {index}"
    fields = _fields(raw)
    role_name = fields.get("role") or fields.get("type")
    role = ROLES.get(str(role_name).lower()) if isinstance(role_name, str) else None
    if role is None:
        raise ValidationError(f"{where}: unknown role {role_name!r} (expected one of {', '.join(sorted(ROLES))})")
    calls = fields.get("tool_calls") or []
    if not isinstance(calls, (list, tuple)):
        raise ValidationError(f"{where}: tool_calls must be a list")
    call_id = fields.get("tool_call_id")
    return {
        "role": role,
        "content": _content(fields.get("content"), where, max_bytes),
        "name": v.optional_text(fields.get("name"), f"{where} name", v.MAX_KEY),
        "tool_calls": [_tool_call(c, where) for c in calls] if role == "assistant" else [],
        "tool_call_id": None if call_id in (None, "") else v.text(str(call_id), f"{where} tool_call_id", v.MAX_KEY),
        "created_at": v.when(fields.get("created_at") or fields.get("timestamp"), f"{where} created_at"),
    }


def normalize_messages(raw: Any, max_bytes: int) -> list[dict[str, Any]]:
    """A list of messages (or ``{"messages": [...]}``) checked and normalised; ``ValidationError`` names
    the first bad message."""
    if isinstance(raw, Mapping) and "messages" in raw:
        raw = raw["messages"]
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
        raise ValidationError("messages must be a list of messages")
    items = list(raw)
    if len(items) > MAX_MESSAGES:
        raise ValidationError(f"at most {MAX_MESSAGES} messages per call")
    return fill_times([normalize_message(m, i, max_bytes) for i, m in enumerate(items)])


def fill_times(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message without a timestamp takes its predecessor's (the first ones their successor's), so
    an imported transcript keeps its own time; with no timestamp at all the store uses now."""
    last = next((r["created_at"] for r in rows if r["created_at"] is not None), None)
    for row in rows:
        if row["created_at"] is None:
            row["created_at"] = last
        last = row["created_at"]
    return rows


def message(row: Mapping[str, Any]) -> Message:
    calls = [ToolCall(name=c.get("name", ""), arguments=c.get("arguments", ""), id=c.get("id"))
             for c in row.get("tool_calls") or []]
    return Message(role=row["role"], content=row.get("content") or "", tool_calls=calls,
                   tool_call_id=row.get("tool_call_id"), name=row.get("name"), seq=row.get("seq"),
                   created_at=row.get("created_at"))


def session(row: Mapping[str, Any]) -> Session:
    return Session(user_id=row["user_id"], session_id=row["session_id"], state=row.get("state") or "open",
                   created_at=row.get("created_at"), last_active=row.get("last_active"),
                   extracted_at=row.get("extracted_at"), message_count=row.get("message_count") or 0,
                   user_messages=row.get("user_messages") or 0, error=row.get("error"),
                   attempts=row.get("attempts") or 0,
                   messages=[message(m) for m in row.get("messages") or []])

