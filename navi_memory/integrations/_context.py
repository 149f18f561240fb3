"""What memory a turn's prompt gets, once for every framework (the contract in ``navi_memory.prompt``).

``MemoryContextBuilder.build(query, first_turn, user_id=...)`` (or ``await abuild(...)``) asks the store for
the summary and the top results (injection mode) or the theme counts (tool-driven mode) and
returns a ``MemoryContext``: ``stable`` text for right after the main system message and
``volatile`` text for next to the current user message. A store failure yields the one-line
unavailable note; the feature flag or kill switch being off yields None (add nothing at all).
The plan is a generator of store calls, run blocking or awaited, like the store's operations.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .. import prompt
from ..core import validation as v
from ..core.persons import hinted_person, infer_speaker
from ..errors import StorageError, ValidationError
from ..models import SearchResult
from ..operations.reads import user_zone
from ..operations.search import check_preset
from ..core.timeutil import zone
from ..promotion import prompt_facts_block
from ._caller import Plan, StoreCaller, store_call

log = logging.getLogger("navi_memory.integrations")

DEFAULT_K = 8  # results searched for a turn's prompt (the adapters' k)
SPEAKER_TEXT_CHARS = 4000  # what speaker inference reads of a turn ("I'm Tom", "my wife ...": the opening)


@dataclass
class MemoryContext:
    """``stable``: summary and promoted facts (injection) or tool guidance (tools) or the unavailable note;
    ``volatile``: the ``## Relevant Memory`` block; ``results``: what the search returned."""

    stable: str | None = None
    volatile: str | None = None
    results: list[SearchResult] = field(default_factory=list)
    searched: bool = False
    available: bool = True


class MemoryContextBuilder:
    """``min_similarity``: the relevance floor of injected memories (``search(min_similarity=)``);
    None takes the store's ``Settings.min_similarity`` (``NAVI_MEMORY_MIN_SCORE``, or its former name
    ``NAVI_MEMORY_MIN_SIMILARITY``), 0 turns it off.
    ``k`` results are searched; as many as fit in ``max_tokens`` (None: the store's
    ``NAVI_MEMORY_INJECTION_TOKENS``) are injected, counted by ``token_counter`` (text -> tokens,
    e.g. a chat model's ``get_num_tokens``; default LangChain's approximate count)."""

    def __init__(self, caller: StoreCaller, *, mode: str = "injection", k: int = DEFAULT_K,
                 search_kwargs: dict[str, Any] | None = None, min_similarity: float | None = None,
                 max_tokens: int | None = None, token_counter: prompt.TokenCounter | None = None) -> None:
        if mode not in prompt.MODES:
            raise ValueError(f"mode must be one of {', '.join(prompt.MODES)}")
        if min_similarity is not None and (isinstance(min_similarity, bool) or not isinstance(
                min_similarity, (int, float)) or not 0 <= min_similarity <= 1):
            raise ValueError("min_similarity must be a number from 0 to 1 (or None for the store's setting)")
        self.caller, self.mode, self.k = caller, mode, k
        store = caller.store
        self.min_similarity = float(store.settings.min_similarity if min_similarity is None else min_similarity)
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError("max_tokens must be a whole number of at least 1 (or None for the store's setting)")
        self.max_tokens = store.settings.injection_tokens if max_tokens is None else max_tokens
        self.default_zone = store.settings.timezone
        self.token_counter = token_counter
        self.search_kwargs = dict(search_kwargs or {})
        # the person of the device or session, if the application knows it: preferred in search
        self.speaker = self.search_kwargs.pop("speaker", None)
        self.device = self.search_kwargs.pop("device", None)  # or the device the turn comes from
        # refused now: at prompt time a bad argument would only log and leave every prompt without memory
        check_preset(self.search_kwargs)

    def _plan(self, query: str | None, first_turn: bool, uid: str, scope: dict[str, Any]) -> Plan[MemoryContext]:
        try:
            if self.mode == "tools":
                if not (yield from store_call.memory_enabled(user_id=uid)):
                    return MemoryContext(stable=prompt.MEMORY_OFF_NOTE, available=False)
                try:
                    themes = yield from store_call.list_themes(  # a scope's hints name only its themes
                        user_id=uid, agent_id=scope.get("agent_id"), run_id=scope.get("run_id"))
                except StorageError:
                    raise
                except Exception as exc:  # hints failed: keep the guidance without them
                    log.info("theme hints skipped: %s", exc)
                    themes = None
                return MemoryContext(stable=prompt.tool_guidance(themes))
            household = yield from store_call.household(user_id=uid)  # members, time zone, memory on or off
            if not household["memory_enabled"]:
                return MemoryContext(stable=prompt.MEMORY_OFF_NOTE, available=False)
            summary = yield from store_call.get_summary(user_id=uid)
            facts = yield from store_call.promoted_facts(user_id=uid)  # the always-in-prompt set
            # the zone of the user's days: the adapter's, the user's, else the store's (named in the
            # prompt unless it is the unconfigured UTC)
            own = self.search_kwargs.get("timezone") or household["timezone"]
            shown = own or (None if self.default_zone == "UTC" else self.default_zone)
            blocks = (prompt.summary_block(summary), prompt.household_block({**household, "timezone": shown}),
                      prompt_facts_block(facts))
            stable = [b for b in blocks if b]
            context = MemoryContext(stable="\n\n".join(stable) or None)
            if prompt.should_retrieve(query, first_turn):
                hints = self._person_hints(query, household)
                # the adapter's search settings may name what the defaults name (its person hints are in hints)
                preset = {"limit": self.k, "min_similarity": self.min_similarity, **self.search_kwargs, **scope}
                preset.pop("person_hints", None)
                context.results = yield from store_call.search(query, user_id=uid, person_hints=hints, **preset)
                context.searched = True
                if context.results:  # dated in the user's days: a late evening in Los Angeles is not tomorrow
                    tz = user_zone(own) if own else zone(self.default_zone)
                    context.volatile = prompt.relevant_memory_block(context.results, self.max_tokens,
                                                                    self.token_counter, tz)
            return context
        except Exception as exc:  # memory must never break the conversation
            log.warning("memory unavailable for this turn: %s", exc)
            return MemoryContext(stable=prompt.UNAVAILABLE_NOTE, available=False)

    def _person_hints(self, query: str | None, household: Mapping[str, Any]) -> list[str]:
        """The turn's speaker and the persons it mentions (household members), then the caller's
        hints: inferred from the household read for the prompt (no read of its own)."""
        given = list(self.search_kwargs.get("person_hints") or ())
        if not household["persons"]:
            return given
        try:
            hinted = hinted_person(household["persons"], self.speaker, self.device)
        except ValidationError as exc:  # a bad hint must not cost the turn its memory
            log.info("speaker hint ignored: %s", exc)
            hinted = None
        text = None if query is None else query[:SPEAKER_TEXT_CHARS]
        return [*infer_speaker(household["persons"], household["mode"], text, hinted).hints, *given]

    def build(self, query: str | None, first_turn: bool = False, *, user_id: str,
              scope: dict[str, Any] | None = None) -> MemoryContext | None:
        """``scope``: ``agent_id`` / ``run_id`` the search keeps to (the summary and promoted facts are the user's)."""
        if not prompt.injection_enabled():
            return None
        return self.caller.run(self._plan(query, first_turn, v.user_id(user_id), dict(scope or {})))

    async def abuild(self, query: str | None, first_turn: bool = False, *, user_id: str,
                     scope: dict[str, Any] | None = None) -> MemoryContext | None:
        if not prompt.injection_enabled():
            return None
        return await self.caller.arun(self._plan(query, first_turn, v.user_id(user_id), dict(scope or {})))


def last_user_text(messages: Sequence[Any]) -> tuple[str | None, bool]:
    """(text of the last user message, True when no assistant message came before) for LangChain
    messages, LlamaIndex ``ChatMessage``s or role/content dicts."""
    text = next((_text(m) for m in reversed(messages) if _role(m) == "user"), None)
    return text, not any(_role(m) == "assistant" for m in messages)


def _role(message: Any) -> str | None:
    def get(name: str) -> Any:
        return message.get(name) if isinstance(message, dict) else getattr(message, name, None)

    role = get("role") or get("type")
    role = getattr(role, "value", role)  # LlamaIndex's MessageRole
    return {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}.get(str(role).lower())


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    if isinstance(content, list):
        return " ".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content
                        if isinstance(p, (str, dict)))
    return str(content or "")
