"""Framework adapters: ``navi_memory.integrations.langchain``, ``navi_memory.integrations.langgraph``
(a LangGraph ``BaseStore``) and ``navi_memory.integrations.llamaindex``; the MCP server
``navi_memory.integrations.mcp``; plain-SDK tools ``navi_memory.integrations.tools``.

Each needs its framework installed (the ``langchain`` / ``llamaindex`` / ``mcp`` / ``tools`` extras);
importing ``navi_memory`` itself never loads them. The adapters only call store methods: searching,
ranking and storage stay in the store.
"""

from ._identity import acting_for

__all__ = ["acting_for"]
