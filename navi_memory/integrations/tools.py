"""The memory tools without a framework: ``MemoryTools(store)`` gives ``openai_schemas()``,
``anthropic_schemas()`` and ``dispatch(name, arguments, user_id=...)`` for a plain OpenAI or
Anthropic SDK tool loop. The same tools, schemas and error texts as the LangChain, LlamaIndex
and MCP adapters. Needs pydantic (the ``tools`` extra; the OpenAI and Anthropic SDKs bring it)."""

from ._tools import TOOLS, MemoryTools, tool_specs

__all__ = ["MemoryTools", "TOOLS", "tool_specs"]
