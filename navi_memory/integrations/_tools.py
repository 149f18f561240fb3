"""The memory tools, once for every framework: names, descriptions, argument schemas, JSON output.

``MemoryTools`` binds a store and a user id; each tool is a method (and an ``a``-prefixed
coroutine) that calls one store operation and returns JSON text for the model. The user id is
never an argument: a model can only read and write the memory of the user it was given.

Expected failures (unknown id, invalid value, arguments outside the schema) come back as
``{"error": ...}`` so the model can correct itself; a database failure comes back as
``{"error": "memory unavailable: ..."}``.
The LangChain and LlamaIndex adapters and the MCP server wrap these methods with the argument
models below; ``openai_schemas``/``anthropic_schemas`` and ``dispatch`` serve a plain OpenAI or
Anthropic SDK loop. The schemas are pydantic's, of those models: for OpenAI's strict mode, of a
strict variant (``strict_arguments``) passed through the OpenAI SDK's ``pydantic_function_tool``
(or LangChain's ``convert_to_openai_tool(strict=True)``) where installed. What each tool returns is
typed in ``_outputs``.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Annotated, Any, Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic import ValidationError as PydanticValidationError

from ..core import validation as v
from ..errors import MemoryOffError, NaviMemoryError, NotFoundError, StorageError, ValidationError
from ..models import FACT_CATEGORIES, HOUSEHOLD_MODES
from . import _outputs as outputs
from ._caller import StoreCall, store_call
from ._caller import StoreCaller as StoreCaller  # re-exported: the adapters take it from here

log = logging.getLogger("navi_memory.integrations")

# search's arguments an adapter may take (as fields or per call); the user and k/limit apart
SEARCH_FILTERS = ("theme", "types", "recency_days", "status", "person", "person_hints", "fusion", "recency",
                  "include_expired", "min_score", "min_similarity", "filters", "namespace_prefix", "agent_id", "run_id",
                  "timezone")
SCOPED = ("agent_id", "run_id")  # resolved with the user (argument, runtime context, config, bound)

ItemType = Literal["preference", "fact", "instruction", "summary", "note", "other"]
FactCategory = Literal["profile", "preferences", "technical", "projects", "other"]
# what a model may say of a fact it saves (auto_discovery is the pipeline's own)
FactSource = Literal["user_explicit", "conversation", "tool_call"]
assert set(FactCategory.__args__) == set(FACT_CATEGORIES)  # type: ignore[attr-defined]


def _untitled(schema: dict[str, Any]) -> None:
    """Drop pydantic's generated titles ("Query" for ``query``): noise in a model's prompt. Done in
    the schema pydantic makes, so every SDK helper that reads it sees none; a field named title stays."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class ToolArgs(BaseModel):
    """A tool's arguments. A null for a field with a default means that default: a model in
    OpenAI's strict mode sends every field, null for those it leaves out. Other fields are ignored."""

    model_config = ConfigDict(json_schema_extra=_untitled)

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {k: val for k, val in data.items() if val is not None or k not in fields or fields[k].is_required()}


class SearchArgs(ToolArgs):
    query: str = Field(description="What to look for, in natural words; '*' or '' lists the newest items.")
    limit: int = Field(default=10, ge=1, le=50, description="Number of results (1-50, default 10).")
    theme: Optional[str] = Field(default=None, description="Only this theme (a slug from memory_list_themes).")
    types: Optional[list[ItemType]] = Field(default=None, description="Only these item types.")
    recency_days: Optional[int] = Field(default=None, ge=1, description="Only items from the last N days.")
    status: Literal["active", "archived", "any"] = Field(
        default="active", description="'active' (default), 'archived', or 'any' to include archived items.")


class AddNoteArgs(ToolArgs):
    content: str = Field(description="The note, self-contained (who, what, when), in one or a few sentences.")
    theme: Optional[str] = Field(default=None, description="Theme to file it under, e.g. 'work' (default 'general').")
    title: Optional[str] = Field(default=None, description="A short title.")
    type: ItemType = Field(default="note", description="'note' (default), 'preference', 'instruction', 'fact' or "
                                                        "'other'.")


class SaveFactArgs(ToolArgs):
    category: FactCategory = Field(description="profile, preferences, technical, projects or other.")
    key: str = Field(description="A short snake_case attribute name, e.g. 'home_city' or 'coffee_order'.")
    value: str = Field(description="The value, e.g. 'Berlin'. A new value replaces the old one (kept in history).")
    source: FactSource = Field(default="user_explicit",
                               description="How you know it: 'user_explicit' (default) the user said it, "
                                           "'conversation' you inferred it from the chat, 'tool_call' a tool's "
                                           "output showed it.")
    confidence: Optional[int] = Field(default=None, ge=0, le=100,
                                      description="0-100 (default by source: user 90, tool output 95, inferred 70).")
    expires_days: Optional[int] = Field(default=None, ge=1, le=36500,
                                        description="Days until it stops being true, for a temporary fact "
                                                    "(a trip, a deadline); default never.")
    source_context: Optional[str] = Field(default=None, description="A short reason or quote: why you saved it.")
    observed_at: Optional[str] = Field(default=None,
                                       description="When the user said it, ISO 8601 (e.g. '2026-10-01'), for a "
                                                   "fact from an earlier conversation; default now. A value said "
                                                   "before the current one goes into the history.")


class ItemArgs(ToolArgs):
    item_id: int = Field(description="The id of a memory item, as returned by memory_search.")


class ForgetArgs(ToolArgs):
    key: str = Field(description="The key of the fact to delete, e.g. 'home_city'.")
    category: Optional[FactCategory] = Field(default=None, description="Only in this category (default: any).")


class NoArgs(ToolArgs):
    pass


# Multi-person households: the person parameters and memory_find_person exist only
# there; in single mode they would only invite the model to guess.
PERSON_FIELD = "A household member (name, alias such as 'mom', or relation such as 'my son')"


class PersonSearchArgs(SearchArgs):
    person: Optional[str] = Field(default=None, description=f"{PERSON_FIELD} whose memories to prefer.")


class PersonAddNoteArgs(AddNoteArgs):
    person: Optional[str] = Field(default=None, description=f"{PERSON_FIELD} the note is about, if it is about "
                                                            "one person.")


class PersonSaveFactArgs(SaveFactArgs):
    person: Optional[str] = Field(default=None, description=f"{PERSON_FIELD} the fact is about (default: the "
                                                            "household as a whole).")


class FindPersonArgs(ToolArgs):
    ref: str = Field(description="A name, alias ('mom', 'Sarah') or relation ('wife', 'child').")


# name: (argument schema, description)
TOOLS: dict[str, tuple[type[ToolArgs], str]] = {
    "memory_search": (SearchArgs, "Search the long-term memory of the user (notes, facts, past conversations) "
                                  "by meaning and keywords. Use it before assuming anything about the user, and "
                                  "when they refer to something from earlier. Returns JSON results with id, "
                                  "theme, type, content_snippet, created_at, score and signals."),
    "memory_add_note": (AddNoteArgs, "Store a note in the user's long-term memory: something worth remembering "
                                     "across conversations. Returns the new item's id, or the id of the item that "
                                     "already holds the same text (status 'existing')."),
    "memory_save_fact": (SaveFactArgs, "Save a stable fact about the user (name, city, preferences, setup, "
                                       "projects) as category/key/value. Returns added, updated or unchanged; an "
                                       "equivalent fact on file under another key (city for home_city) is "
                                       "updated rather than doubled."),
    "memory_get": (ItemArgs, "Read one memory item in full by its id."),
    "memory_archive": (ItemArgs, "Archive a memory item that is outdated or wrong: it leaves default searches "
                                 "but is kept."),
    "memory_forget": (ForgetArgs, "Delete a fact about the user for good, by key. Use it when the user asks to "
                                  "forget something or a fact is clearly obsolete."),
    "memory_list_themes": (NoArgs, "List the themes of the user's memory with their numbers of active items."),
}


MULTI_TOOLS: dict[str, tuple[type[ToolArgs], str]] = {
    **TOOLS,
    "memory_search": (PersonSearchArgs, TOOLS["memory_search"][1]),
    "memory_add_note": (PersonAddNoteArgs, TOOLS["memory_add_note"][1]),
    "memory_save_fact": (PersonSaveFactArgs, TOOLS["memory_save_fact"][1]),
    "memory_find_person": (FindPersonArgs, "Find a member of the user's household by name, alias or relation. "
                                           "Returns the person (display name, role, aliases, pronouns) or null "
                                           "when unknown or ambiguous."),
}


def tool_specs(household: str) -> dict[str, tuple[type[ToolArgs], str]]:
    """The tools, their schemas and descriptions for a household mode ('single' or 'multi')."""
    if household not in HOUSEHOLD_MODES:
        raise ValueError(f"household must be 'single' or 'multi', not {household!r}")
    return MULTI_TOOLS if household == "multi" else TOOLS


@lru_cache(maxsize=None)
def strict_arguments(args: type[ToolArgs]) -> type[BaseModel]:
    """``args`` as OpenAI's strict mode wants it: every field required, a field with a default
    nullable instead (null: the default, as ``ToolArgs`` reads it; no ``default`` keyword, which
    strict mode refuses), no other fields (``additionalProperties: false``). Only its schema is used."""
    fields: dict[str, Any] = {}
    for name, info in args.model_fields.items():
        annotation: Any = info.annotation if info.is_required() else Optional[info.annotation]
        if info.metadata:  # constraints (ge, le) stay on the value
            constrained = (annotation, *info.metadata)
            annotation = Annotated[constrained]
        fields[name] = (annotation, Field(description=info.description))
    return create_model(args.__name__, __config__=ConfigDict(extra="forbid", json_schema_extra=_untitled), **fields)


def openai_tool(name: str, description: str, args: type[ToolArgs], *, strict: bool = True) -> dict[str, Any]:
    """A tool in OpenAI's Chat Completions form. Strict: made by the OpenAI SDK's
    ``pydantic_function_tool``, else LangChain's ``convert_to_openai_tool(strict=True)``, from
    ``strict_arguments``; with neither installed, from pydantic's schema of that model alone (it
    already keeps the rules the SDKs enforce)."""
    if not strict:
        return {"type": "function", "function": {"name": name, "description": description,
                                                 "parameters": args.model_json_schema()}}
    model = strict_arguments(args)
    try:
        from openai import pydantic_function_tool
    except ImportError:
        pass
    else:  # plain dicts: the SDK's own dict type carries the model along
        return {"type": "function", "function": dict(pydantic_function_tool(model, name=name,
                                                                            description=description)["function"])}
    try:
        from langchain_core.utils.function_calling import convert_to_openai_tool
    except ImportError:
        pass
    else:  # it names the tool after the schema's title, which is dropped
        function = convert_to_openai_tool(model, strict=True)["function"]
        return {"type": "function", "function": {**function, "name": name, "description": description}}
    return {"type": "function", "function": {"name": name, "description": description, "strict": True,
                                             "parameters": model.model_json_schema()}}


def responses_tool(name: str, description: str, args: type[ToolArgs], *, strict: bool = True) -> dict[str, Any]:
    """A tool in OpenAI's Responses API form: the Chat Completions function, flat, ``strict`` always said."""
    function = openai_tool(name, description, args, strict=strict)["function"]
    return {"type": "function", **function, "strict": strict}


def anthropic_tool(name: str, description: str, args: type[ToolArgs]) -> dict[str, Any]:
    """A tool in Anthropic's Messages API form, as its SDK makes one from a pydantic model."""
    return {"name": name, "description": description, "input_schema": args.model_json_schema()}


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict: a mapping, a JSON object text (as OpenAI sends them) or None."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, (str, bytes, bytearray)):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:  # the text itself is not echoed: it may hold the user's data
            raise ValidationError(f"invalid arguments: not JSON ({exc.__class__.__name__} at position "
                                  f"{getattr(exc, 'pos', '?')})") from exc
        except RecursionError as exc:  # a model's reply nested past the parser's depth
            raise ValidationError("invalid arguments: JSON nested too deeply") from exc
    if not isinstance(arguments, dict):
        raise ValidationError(f"invalid arguments: a JSON object is expected, not {type(arguments).__name__}")
    if not all(isinstance(key, str) for key in arguments):
        raise ValidationError("invalid arguments: every argument name must be a string")
    return arguments


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def argument_error(exc: Exception) -> str:
    """A short message for arguments that do not fit a tool's schema (no input values echoed)."""
    listed = getattr(exc, "errors", None)
    errors: list[Any] = listed() if callable(listed) else []
    problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: {e.get('msg', 'invalid')}"
                         for e in errors)
    return f"invalid arguments: {problems or exc}"


def error_json(exc: Exception) -> str:
    if isinstance(exc, (ValidationError, NotFoundError, MemoryOffError)):
        return dumps({"error": str(exc)})
    log.warning("memory tool failed: %s", exc)
    if isinstance(exc, StorageError):
        return dumps({"error": "memory unavailable: the memory database could not be reached"})
    return dumps({"error": f"memory unavailable: {exc}"})


UNBOUND: Any = object()  # MemoryTools(store) without a user: every call passes user_id=


class MemoryTools:
    """The tool set for one user (``MemoryTools(store, "u1")``), or for the user each call names
    (``MemoryTools(store)``, then ``dispatch(..., user_id=...)``). ``run``/``dispatch`` return JSON
    text; ``arun``/``adispatch`` are their coroutines (native with an ``AsyncMemoryStore``, else run
    in a worker thread). ``openai_schemas()``/``anthropic_schemas()`` describe the tools for a
    plain SDK tool loop; the LangChain, LlamaIndex and MCP tools use the same schemas.

    Scopes: ``agent_id`` / ``run_id`` (bound here or given per call, a call's must match a bound
    one) tag the notes and facts a tool writes; when set, every tool keeps to them: search only
    finds what was written with them, get and archive reach only such an item (another is an
    unknown id), forget deletes only such a fact and the themes listed are those holding such an
    item, counted by them. The model never sees or fills them."""

    def __init__(self, store: Any, user_id: Any = UNBOUND, *, async_store: Any = None,
                 household: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> None:
        # exact or refused (ValidationError, a ValueError), never trimmed. Left out: each dispatch
        # names its user; an explicit None stays an error (an unset variable, not a choice).
        self.user_id = None if user_id is UNBOUND else v.user_id(user_id)
        self.scope = {name: v.scope_id(value, name) for name, value in (("agent_id", agent_id), ("run_id", run_id))}
        self.caller = StoreCaller(store, async_store)
        self.household = household or self._household_mode()
        self.specs = tool_specs(self.household)

    def _household_mode(self) -> str:
        """The user's household mode, read once (an async-only store or an unbound user cannot be
        asked here: single, unless ``household="multi"`` is passed)."""
        if self.caller.sync_store is None or self.user_id is None:
            return "single"
        try:
            return self.caller.call(store_call.household_mode(user_id=self.user_id))
        except NaviMemoryError as exc:
            log.warning("household mode unknown (%s): the person parameters stay hidden", exc)
            return "single"

    # (store call, formatter of its result) per tool
    def _plan(self, name: str, args: dict[str, Any], uid: str,
              scope: dict[str, Any]) -> tuple[StoreCall[Any], Callable[[Any], outputs.ToolOutput]]:
        if name == "memory_search":
            return (store_call.search(args["query"], user_id=uid, limit=args["limit"], theme=args["theme"],
                                      types=args["types"], recency_days=args["recency_days"], status=args["status"],
                                      **scope, person_hints=[args["person"]] if args.get("person") else []),
                    lambda rs: outputs.search_json(rs, getattr(rs, "hidden", 0)))
        if name == "memory_add_note":
            return (store_call.add_note(user_id=uid, content=args["content"], theme=args["theme"], title=args["title"],
                                        type=args["type"], source="tool_call", person=args.get("person"), **scope),
                    outputs.note_json)
        if name == "memory_save_fact":
            # the model's own word on how it knows (default: the user said it), so a later correction in
            # the chat can replace the value; only a tool's output outranks what the user says
            return (store_call.upsert_fact(user_id=uid, category=args["category"], key=args["key"], value=args["value"],
                                           source=args["source"], confidence=args["confidence"],
                                           expires_days=args["expires_days"], source_context=args["source_context"],
                                           person=args.get("person"), observed_at=args["observed_at"], **scope),
                    outputs.fact_change_json)
        if name == "memory_get":
            return store_call.get(args["item_id"], user_id=uid, **scope), outputs.item_json
        if name == "memory_archive":
            return store_call.archive(args["item_id"], user_id=uid, **scope), outputs.archive_json
        if name == "memory_forget":
            return (store_call.delete_fact(args["key"], user_id=uid, category=args["category"], **scope),
                    lambda n: outputs.forget_json(n, args["key"]))
        if name == "memory_list_themes":
            return store_call.list_themes(user_id=uid, **scope), outputs.themes_json
        if name == "memory_find_person":
            return store_call.resolve_person_ref(args["ref"], user_id=uid), outputs.person_json
        raise KeyError(name)

    def _parse(self, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if name not in self.specs:
            raise ValidationError(f"unknown memory tool {name!r}; the tools are: {', '.join(self.specs)}")
        schema = self.specs[name][0]
        try:
            return schema(**kwargs).model_dump()
        except PydanticValidationError as exc:  # the model can correct itself from the message
            raise ValidationError(argument_error(exc)) from exc

    def resolve_user(self, user_id: Any = None) -> str:
        """The user a call acts for: ``user_id`` if given (it must match a bound one), else the bound one."""
        if user_id is None:
            if self.user_id is None:
                raise ValidationError("no user: pass user_id= to the call or bind one with MemoryTools(store, "
                                      "user_id)")
            return self.user_id
        uid = v.user_id(user_id)
        if self.user_id is not None and uid != self.user_id:
            raise ValidationError("user_id differs from the user these tools are bound to")
        return uid

    def resolve_scope(self, agent_id: Any = None, run_id: Any = None) -> dict[str, str]:
        """The scopes a call acts in (only those set): each given one must match a bound one."""
        out: dict[str, str] = {}
        for name, given in (("agent_id", agent_id), ("run_id", run_id)):
            value, bound = v.scope_id(given, name), self.scope[name]
            if value is not None and bound is not None and value != bound:
                raise ValidationError(f"{name} differs from the {name} these tools are bound to")
            chosen = value or bound
            if chosen is not None:
                out[name] = chosen
        return out

    def execute(self, name: str, kwargs: dict[str, Any], user_id: Any = None, *, agent_id: Any = None,
                run_id: Any = None) -> str:
        """One tool call; raises ``NaviMemoryError`` (``ValidationError`` for an unknown tool or bad arguments)."""
        call, fmt = self._plan(name, self._parse(name, kwargs), self.resolve_user(user_id),
                               self.resolve_scope(agent_id, run_id))
        return dumps(fmt(self.caller.call(call)))

    async def aexecute(self, name: str, kwargs: dict[str, Any], user_id: Any = None, *, agent_id: Any = None,
                       run_id: Any = None) -> str:
        """Coroutine of ``execute``."""
        call, fmt = self._plan(name, self._parse(name, kwargs), self.resolve_user(user_id),
                               self.resolve_scope(agent_id, run_id))
        return dumps(fmt(await self.caller.acall(call)))

    def run(self, name: str, **kwargs: Any) -> str:
        try:
            return self.execute(name, kwargs)
        except NaviMemoryError as exc:
            return error_json(exc)

    async def arun(self, name: str, **kwargs: Any) -> str:
        try:
            return await self.aexecute(name, kwargs)
        except NaviMemoryError as exc:
            return error_json(exc)

    def openai_schemas(self, *, strict: bool = True,
                       api: Literal["chat", "responses"] = "chat") -> list[dict[str, Any]]:
        """The tools as OpenAI function tools: the names, descriptions and arguments the LangChain and
        LlamaIndex tools have; no schema holds a user id. ``api="chat"`` (Chat Completions
        ``tools=``: ``{"type": "function", "function": {...}}``) or ``"responses"`` (Responses API:
        the function's keys flat). ``strict`` (default): OpenAI's strict mode, every field required
        and the optional ones nullable (``dispatch`` reads a null as the default); ``strict=False``:
        the plain schema (optional fields left out of ``required``, with their defaults)."""
        if api not in ("chat", "responses"):
            raise ValidationError(f"api must be 'chat' or 'responses', not {api!r}")
        make = openai_tool if api == "chat" else responses_tool
        return [make(name, description, args, strict=strict) for name, (args, description) in self.specs.items()]

    def anthropic_schemas(self) -> list[dict[str, Any]]:
        """The tools as Anthropic Messages API tools (``name``, ``description``, ``input_schema``)."""
        return [anthropic_tool(name, description, args) for name, (args, description) in self.specs.items()]

    def dispatch(self, name: str, arguments: Any = None, *, user_id: Any = None, agent_id: Any = None,
                 run_id: Any = None, errors: str = "raise") -> str:
        """Run the tool a model called: ``arguments`` as a dict or the JSON text the model produced,
        for ``user_id`` (and the scopes ``agent_id`` / ``run_id``, if any: writes are tagged with
        them, reads keep to them). Returns the JSON text the framework tools return. ``errors="raise"`` (default) raises
        ``NaviMemoryError`` (``ValidationError`` for an unknown tool or bad arguments, naming the field);
        ``errors="return"`` returns ``{"error": ...}`` text instead, for the model to correct itself."""
        _check_errors_mode(errors)
        try:
            return self.execute(name, parse_arguments(arguments), user_id, agent_id=agent_id, run_id=run_id)
        except NaviMemoryError as exc:
            if errors == "raise":
                raise
            return error_json(exc)

    async def adispatch(self, name: str, arguments: Any = None, *, user_id: Any = None, agent_id: Any = None,
                        run_id: Any = None, errors: str = "raise") -> str:
        """Coroutine of ``dispatch``."""
        _check_errors_mode(errors)
        try:
            return await self.aexecute(name, parse_arguments(arguments), user_id, agent_id=agent_id, run_id=run_id)
        except NaviMemoryError as exc:
            if errors == "raise":
                raise
            return error_json(exc)

    def functions(self, name: str, who: Callable[[], Any] | None = None) -> tuple[Callable[..., str],
                                                                                Callable[..., Any]]:
        """(blocking function, coroutine function) of one tool, taking its arguments as keywords;
        ``who()`` names the identity of each call (an ``Identity``: user and scopes; default: the
        bound ones). A failure to name one raises: it is the application's mistake, not the model's."""
        def sync(**kwargs: Any) -> str:
            return self.dispatch(name, kwargs, **_who(who), errors="return")

        async def run_async(**kwargs: Any) -> str:
            return await self.adispatch(name, kwargs, **_who(who), errors="return")

        sync.__name__ = name
        run_async.__name__ = f"a{name}"
        return sync, run_async


def _who(who: Callable[[], Any] | None) -> dict[str, Any]:
    """The dispatch keywords (user_id, agent_id, run_id) of the identity ``who()`` names."""
    if who is None:
        return {}
    identity = who()
    return {"user_id": identity.user_id, "agent_id": identity.agent_id, "run_id": identity.run_id}


def _check_errors_mode(errors: str) -> None:
    if errors not in ("raise", "return"):
        raise ValidationError(f"errors must be 'raise' or 'return', not {errors!r}")
