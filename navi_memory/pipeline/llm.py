"""The chat model behind extraction and summaries: any LangChain chat model, or Ollama by default.

``ChatClient`` wraps the model: it asks for structured output where the model supports it
(``with_structured_output``), falls back to plain text otherwise, retries rate limits and transient
failures with jittered exponential backoff (``RetryPolicy.wait_before``), optionally paces calls
(``InMemoryRateLimiter``), drops a reasoning model's ``<think>`` block from the text, measures
tokens (the provider's ``usage_metadata``, else an estimate of 4 characters a token) and turns
every provider failure into ``ExtractionError``. LangChain is imported only when a model is built
or called.

``ask`` is the sans-I/O step operations use: it yields the call for the store's runner (``invoke``
in ``MemoryStore``, ``await ainvoke`` in ``AsyncMemoryStore``) and books the cost in a ledger.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import math
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TypedDict

from ..config import Settings
from ..embeddings import provider_model_name
from ..errors import ConfigurationError, ExtractionError
from ..providers import CHAT_PROVIDERS, langchain_chat, split_model
from ..calls import Chat
from ..sansio import Op

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
# HTTP statuses worth another attempt: timeouts, conflicts, rate limits, a server's temporary failure
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
# words in the class names providers give such failures (openai, anthropic, httpx, ollama, google)
_TRANSIENT_NAMES = ("ratelimit", "timeout", "timedout", "connecterror", "connectionerror", "apiconnection",
                    "serviceunavailable", "internalserver", "overloaded", "remoteprotocol", "resourceexhausted")
_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.S | re.I)


def is_transient(exc: BaseException) -> bool:
    """Whether a provider failure may succeed on another attempt: a rate limit, a timeout, a dropped
    connection, a server's 5xx. Bad requests, authentication and parsing errors are not retried."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return status in TRANSIENT_STATUS
    names = [cls.__name__.lower() for cls in type(exc).__mro__]
    return any(word in name for name in names for word in _TRANSIENT_NAMES)


def strip_reasoning(text: str) -> str:
    """The reply without a reasoning model's ``<think>...</think>`` (also ``<thinking>``,
    ``<reasoning>``; an unclosed one runs to the end): drafts in it are not the answer."""
    return _REASONING.sub("", text).strip() if "<" in text else text


@dataclass(frozen=True)
class RetryPolicy:
    """How chat calls are retried and paced (``Settings.chat_attempts``, ``chat_retry_wait``,
    ``chat_rate_limit``)."""

    attempts: int = 3
    initial_wait: float = 1.0
    max_wait: float = 30.0
    requests_per_second: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ConfigurationError("chat attempts must be a whole number of at least 1")
        for name in ("initial_wait", "max_wait"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ConfigurationError(f"chat retry {name} must be a number of seconds >= 0")
        rps = self.requests_per_second
        if rps is not None and not (math.isfinite(rps) and rps > 0):
            raise ConfigurationError("the chat rate limit must be a positive number of calls per second")

    def wait_before(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt + 1``: the first wait doubled per attempt plus a
        jitter of up to one first wait, at most ``max_wait``; 0 when the first wait is 0."""
        if self.initial_wait == 0:
            return 0.0
        doubled = self.initial_wait * 2.0 ** min(attempt - 1, 64)
        return min(self.max_wait, doubled + random.uniform(0, self.initial_wait))

    @classmethod
    def from_settings(cls, settings: Settings) -> "RetryPolicy":
        return cls(settings.chat_attempts, settings.chat_retry_wait, max(30.0, settings.chat_retry_wait),
                   settings.chat_rate_limit)


class CallRecord(TypedDict):
    """A chat model call as a ledger books it (``ask``), and ``llm_calls`` stores it (failed ones too)."""

    purpose: str
    model: str | None  # None: failed before a reply named it (``OperationsShared.named_calls``)
    input_tokens: int
    output_tokens: int
    estimated: bool
    ok: bool
    error: str | None


@dataclass
class LLMReply:
    text: str
    parsed: Any = None  # the structured output, when the model produced one
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False
    model: str | None = None


def content_text(content: Any) -> str:
    """A message's content as text (content blocks joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content if isinstance(p, (str, dict)))
    return "" if content is None else str(content)


class ChatClient:
    """A chat model plus the rules around it; built on first use."""

    def __init__(self, factory: Callable[[], Any], name: str, timeout: float | None = None,
                 retry: RetryPolicy | None = None) -> None:
        self._factory = factory
        self._model: Any = None
        self.name = name
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._runnables: dict[str, tuple[Any, bool]] = {}
        self._limiter: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ChatClient({self.name!r})"

    @classmethod
    def wrap(cls, model: Any, timeout: float | None = None, retry: RetryPolicy | None = None) -> "ChatClient":
        if not callable(getattr(model, "invoke", None)):
            raise ConfigurationError("chat_model must be a LangChain chat model (an object with invoke())")
        return cls(lambda: model, provider_model_name(model), timeout, retry)

    @property
    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._factory()
            return self._model

    def _runnable(self, schema: dict[str, Any] | None) -> tuple[Any, bool]:
        """The runnable for ``schema`` (the structured-output one when the model has it, else the
        model), retried and paced; built once per schema; True when it returns structured output."""
        model = self.model
        key = "" if schema is None else schema.get("title", "schema")
        with self._lock:
            if key not in self._runnables:
                structured = None
                if schema is not None:
                    try:
                        structured = model.with_structured_output(schema, include_raw=True)
                    except (NotImplementedError, AttributeError, ValueError, TypeError) as exc:
                        log.info("chat model %s has no structured output (%s); parsing JSON from text",
                                 self.name, type(exc).__name__)
                self._runnables[key] = (self._guarded(structured or model), structured is not None)
            return self._runnables[key]

    def _guarded(self, runnable: Any) -> Any:
        """``runnable`` paced by the rate limiter and retried on transient failures. The retry is our
        own loop: LangChain's ``with_retry`` passes only the keys it knows to tenacity and dropped the
        first wait (``multiplier``), so every retry slept a second whatever the settings said."""
        from langchain_core.runnables import RunnableLambda

        if self.retry.requests_per_second and self._limiter is None:
            from langchain_core.rate_limiters import InMemoryRateLimiter

            self._limiter = InMemoryRateLimiter(requests_per_second=self.retry.requests_per_second,
                                                check_every_n_seconds=0.05, max_bucket_size=1)
        limiter, policy, name = self._limiter, self.retry, self.name

        def retried(attempt: int, exc: Exception) -> float:
            """The wait before the next attempt, or ``exc`` raised when there is none."""
            if attempt >= policy.attempts or not is_transient(exc):
                raise exc
            wait = policy.wait_before(attempt)
            log.info("chat model %s: %s (attempt %d of %d); retrying in %.2f s", name, type(exc).__name__,
                     attempt, policy.attempts, wait)
            return wait

        def call(messages: Any) -> Any:
            for attempt in range(1, policy.attempts + 1):
                if limiter is not None:
                    limiter.acquire()
                try:
                    return runnable.invoke(messages)
                except Exception as exc:
                    wait = retried(attempt, exc)
                if wait > 0:
                    time.sleep(wait)
            raise AssertionError("unreachable: the last attempt returns or raises")

        async def acall(messages: Any) -> Any:
            for attempt in range(1, policy.attempts + 1):
                if limiter is not None:
                    await limiter.aacquire()
                try:
                    return await runnable.ainvoke(messages)
                except Exception as exc:
                    wait = retried(attempt, exc)
                if wait > 0:
                    await asyncio.sleep(wait)
            raise AssertionError("unreachable: the last attempt returns or raises")

        return RunnableLambda(call, afunc=acall, name=f"navi-memory chat ({self.name})")

    def _reply(self, messages: list[tuple[str, str]], out: Any, structured: bool) -> LLMReply:
        raw, parsed = (out.get("raw"), out.get("parsed")) if structured and isinstance(out, dict) else (out, None)
        text = strip_reasoning(content_text(getattr(raw, "content", raw)))
        calls = getattr(raw, "tool_calls", None) or []
        if not text.strip() and calls:
            text = json.dumps(calls[0].get("args", {}), ensure_ascii=False)
        if parsed is not None and hasattr(parsed, "model_dump"):
            parsed = parsed.model_dump()
        usage = getattr(raw, "usage_metadata", None) or {}
        if usage.get("input_tokens") or usage.get("output_tokens"):
            return LLMReply(text, parsed, int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
                            False, self.name)
        sent = sum(len(content) for _, content in messages)
        return LLMReply(text, parsed, sent // CHARS_PER_TOKEN + 1, len(text) // CHARS_PER_TOKEN + 1, True, self.name)

    def _failed(self, purpose: str, exc: BaseException) -> ExtractionError:
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return ExtractionError(f"chat model {self.name} failed ({purpose}): {type(exc).__name__}: {message}")

    def invoke(self, purpose: str, messages: list[tuple[str, str]], schema: dict[str, Any] | None = None) -> LLMReply:
        try:
            runnable, structured = self._runnable(schema)
            return self._reply(messages, runnable.invoke(messages), structured)
        except ConfigurationError:
            raise
        except Exception as exc:  # any provider failure: recorded on the session, retried later
            raise self._failed(purpose, exc) from exc

    async def ainvoke(self, purpose: str, messages: list[tuple[str, str]],
                      schema: dict[str, Any] | None = None) -> LLMReply:
        try:
            runnable, structured = await asyncio.to_thread(self._runnable, schema)
            out = await asyncio.wait_for(runnable.ainvoke(messages), self.timeout)
            return self._reply(messages, out, structured)
        except ConfigurationError:
            raise
        except Exception as exc:
            raise self._failed(purpose, exc) from exc


def _ollama_chat(settings: Settings, model: str) -> Any:
    try:
        from langchain_ollama import ChatOllama
    except ImportError as exc:
        raise ConfigurationError("the Ollama chat model needs the 'ollama' extra: pip install 'navi-memory[ollama]'") from exc
    client_kwargs: dict[str, Any] = {"timeout": settings.chat_timeout}
    if settings.chat_api_key:
        client_kwargs["headers"] = {"Authorization": f"Bearer {settings.chat_api_key}"}
    return ChatOllama(model=model, base_url=settings.chat_host, temperature=0, client_kwargs=client_kwargs)


def resolve_chat_model(choice: Any, settings: Settings) -> ChatClient | None:
    """A ``ChatClient`` for ``choice``: a LangChain chat model, an Ollama model name, ``False`` or
    ``"none"`` (no LLM), or None for the environment (``NAVI_MEMORY_CHAT_MODEL``)."""
    if isinstance(choice, ChatClient):
        return choice
    if choice is False:
        return None
    if choice is not None and not isinstance(choice, str):
        return ChatClient.wrap(choice, settings.chat_timeout, RetryPolicy.from_settings(settings))
    name = (choice if choice is not None else settings.chat_model or "").strip()
    if not name or name.lower() == "none":
        return None
    other = split_model(name, CHAT_PROVIDERS)
    if other is not None:  # "openai:gpt-4o-mini", "anthropic:...": LangChain's init_chat_model
        provider, model = other
        return ChatClient(lambda: langchain_chat(settings, provider, model), f"{provider}:{model}",
                          settings.chat_timeout, RetryPolicy.from_settings(settings))
    name = name.split(":", 1)[1] if name.lower().startswith("ollama:") else name
    if importlib.util.find_spec("langchain_ollama") is None:
        raise ConfigurationError("the Ollama chat model needs the 'ollama' extra: pip install 'navi-memory[ollama]'")
    return ChatClient(lambda: _ollama_chat(settings, name), f"ChatOllama:{name}", settings.chat_timeout,
                      RetryPolicy.from_settings(settings))


def ask(purpose: str, messages: list[tuple[str, str]], ledger: list[CallRecord],
        schema: dict[str, Any] | None = None) -> Op[LLMReply]:
    """One chat call through the store's runner, booked in ``ledger`` (failed calls too)."""
    try:
        reply: LLMReply = yield Chat(purpose, messages, schema)
    except ExtractionError as exc:
        ledger.append({"purpose": purpose, "model": None, "input_tokens": 0, "output_tokens": 0,
                       "estimated": False, "ok": False, "error": str(exc)[:500]})
        raise
    ledger.append({"purpose": purpose, "model": reply.model, "input_tokens": reply.input_tokens,
                   "output_tokens": reply.output_tokens, "estimated": reply.estimated, "ok": True, "error": None})
    return reply
