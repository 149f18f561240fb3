"""The chat model behind extraction and summaries: any LangChain chat model, or Ollama by default.

``ChatClient`` wraps the model: it asks for structured output where the model supports it
(``with_structured_output``), falls back to plain text otherwise, measures tokens (the provider's
``usage_metadata``, else an estimate of 4 characters a token) and turns every provider failure
into ``ExtractionError``. LangChain is imported only when a model is built or called.

``ask`` is the sans-I/O step operations use: it yields the call for the store's runner (``invoke``
in ``MemoryStore``, ``await ainvoke`` in ``AsyncMemoryStore``) and books the cost in a ledger.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable

from ..config import Settings
from ..embeddings import provider_model_name
from ..errors import ConfigurationError, ExtractionError
from ..operations import Call
from ..sansio import Op

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4


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

    def __init__(self, factory: Callable[[], Any], name: str, timeout: float | None = None) -> None:
        self._factory = factory
        self._model: Any = None
        self.name = name
        self.timeout = timeout
        self._structured: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ChatClient({self.name!r})"

    @classmethod
    def wrap(cls, model: Any, timeout: float | None = None) -> "ChatClient":
        if not callable(getattr(model, "invoke", None)):
            raise ConfigurationError("chat_model must be a LangChain chat model (an object with invoke())")
        return cls(lambda: model, provider_model_name(model), timeout)

    @property
    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._factory()
            return self._model

    def _runnable(self, schema: dict | None) -> tuple[Any, bool]:
        """The structured-output runnable for ``schema`` when the model has one, else the model."""
        model = self.model
        if schema is None:
            return model, False
        key = schema.get("title", "schema")
        with self._lock:
            if key not in self._structured:
                try:
                    self._structured[key] = model.with_structured_output(schema, include_raw=True)
                except (NotImplementedError, AttributeError, ValueError, TypeError) as exc:
                    log.info("chat model %s has no structured output (%s); parsing JSON from text",
                             self.name, type(exc).__name__)
                    self._structured[key] = None
            runnable = self._structured[key]
        return (runnable, True) if runnable is not None else (model, False)

    def _reply(self, messages: list[tuple[str, str]], out: Any, structured: bool) -> LLMReply:
        raw, parsed = (out.get("raw"), out.get("parsed")) if structured and isinstance(out, dict) else (out, None)
        text = content_text(getattr(raw, "content", raw))
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

    def invoke(self, purpose: str, messages: list[tuple[str, str]], schema: dict | None = None) -> LLMReply:
        try:
            runnable, structured = self._runnable(schema)
            return self._reply(messages, runnable.invoke(messages), structured)
        except ConfigurationError:
            raise
        except Exception as exc:  # any provider failure: recorded on the session, retried later
            raise self._failed(purpose, exc) from exc

    async def ainvoke(self, purpose: str, messages: list[tuple[str, str]], schema: dict | None = None) -> LLMReply:
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
        return ChatClient.wrap(choice, settings.chat_timeout)
    name = (choice if choice is not None else settings.chat_model or "").strip()
    if not name or name.lower() == "none":
        return None
    name = name.split(":", 1)[1] if name.lower().startswith("ollama:") else name
    if importlib.util.find_spec("langchain_ollama") is None:
        raise ConfigurationError("the Ollama chat model needs the 'ollama' extra: pip install 'navi-memory[ollama]'")
    return ChatClient(lambda: _ollama_chat(settings, name), f"ChatOllama:{name}", settings.chat_timeout)


def ask(purpose: str, messages: list[tuple[str, str]], ledger: list[dict], schema: dict | None = None) -> Op:
    """One chat call through the store's runner, booked in ``ledger`` (failed calls too)."""
    try:
        reply: LLMReply = yield Call("llm", purpose, (messages,), {"schema": schema})
    except ExtractionError as exc:
        ledger.append({"purpose": purpose, "model": None, "input_tokens": 0, "output_tokens": 0,
                       "estimated": False, "ok": False, "error": str(exc)[:500]})
        raise
    ledger.append({"purpose": purpose, "model": reply.model, "input_tokens": reply.input_tokens,
                   "output_tokens": reply.output_tokens, "estimated": reply.estimated, "ok": True, "error": None})
    return reply
