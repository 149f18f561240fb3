"""Scripted chat models for the pipeline tests, built on LangChain's own fakes.

``ScriptedChat`` answers from a script, in order. An entry is a string (the reply text), a dict
(sent as JSON text, or as the structured output of ``StructuredChat``), an ``AIMessage``, an
exception (raised, like a provider failure) or a callable taking the prompt messages. Every call's
prompt is kept in ``calls``; a call beyond the script is an error, so tests also pin the number of
calls. ``gate`` (a ``threading.Event``) or ``agate`` (an ``asyncio.Event``) hold a reply back until
set, to prove the caller is not blocked. ``usage`` sets the token counts the provider reports.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from pydantic import Field


class ScriptedChat(GenericFakeChatModel):
    messages: Iterator[Any] = Field(default_factory=lambda: iter(()))
    script: list[Any] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    usage: tuple[int, int] | None = (120, 30)
    gate: Any = None
    agate: Any = None
    model: str = "scripted"

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls.append(list(messages))
        if not self.script:
            raise AssertionError("the chat model was called more often than scripted")
        entry = self.script.pop(0)
        if isinstance(entry, BaseException):
            raise entry
        if callable(entry):
            entry = entry(messages)
        if isinstance(entry, AIMessage):
            return entry
        text = entry if isinstance(entry, str) else json.dumps(entry)
        return AIMessage(content=text, usage_metadata=self._usage())

    def _usage(self) -> Any:
        if self.usage is None:
            return None
        return {"input_tokens": self.usage[0], "output_tokens": self.usage[1], "total_tokens": sum(self.usage)}

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if self.gate is not None:
            assert self.gate.wait(30), "gate never opened"
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        if self.agate is not None:
            await self.agate.wait()
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def prompt(self, index: int = -1) -> str:
        """The text of the last (human) message of call ``index``."""
        return str(self.calls[index][-1].content)


class StructuredChat(ScriptedChat):
    """Supports ``with_structured_output``: a dict entry comes back as a tool call, parsed."""

    structured_calls: int = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> "StructuredChat":
        return self

    def _as_tool_call(self) -> None:
        self.structured_calls += 1
        if self.script and isinstance(self.script[0], dict):
            self.script[0] = AIMessage(content="", tool_calls=[{"name": "memory_update", "args": self.script[0],
                                                                 "id": "call-1"}], usage_metadata=self._usage())

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Any:
        def parse(message: AIMessage) -> Any:
            parsed, error = None, None
            if message.tool_calls:
                parsed = message.tool_calls[0]["args"]
            else:
                try:
                    parsed = json.loads(str(message.content))
                except ValueError as exc:
                    error = exc
            return {"raw": message, "parsed": parsed, "parsing_error": error} if include_raw else parsed

        def invoke(value: Any) -> Any:
            self._as_tool_call()
            return parse(self.invoke(value))

        async def ainvoke(value: Any) -> Any:
            self._as_tool_call()
            return parse(await self.ainvoke(value))

        return RunnableLambda(invoke, afunc=ainvoke)
