"""The memory tools without a framework: ``MemoryTools(store)`` gives ``openai_schemas()``
(Chat Completions or, ``api="responses"``, the Responses API; OpenAI's strict mode unless
``strict=False``), ``anthropic_schemas()`` and ``dispatch(name, arguments, user_id=...)`` for a
plain OpenAI or Anthropic SDK tool loop. The same tools, schemas and error texts as the LangChain,
LlamaIndex and MCP adapters; ``output_schema(name)`` is the JSON schema of a tool's output. Needs
pydantic (the ``tools`` extra; the OpenAI and Anthropic SDKs bring it)."""

from ._outputs import output_schema
from ._tools import TOOLS, MemoryTools, tool_specs

__all__ = ["MemoryTools", "TOOLS", "output_schema", "tool_specs"]
