"""LangChain's standard test suites for the retriever and every memory tool (on each backend)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import RetrieversIntegrationTests, ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from navi_memory.integrations.langchain import NaviMemoryRetriever, NaviMemoryToolkit

NOTES = ["I drink oat milk lattes every morning", "My coffee grinder is a Baratza Encore",
         "Espresso tastes best with a medium roast coffee", "I take coffee to the office in a thermos",
         "Cold brew coffee is my summer drink"]


class SeededStore:
    """Binds the per-test store (sqlite or postgres) with a few coffee notes and one fact."""

    ids: list[int]

    @pytest.fixture(autouse=True)
    def _seed(self, store: Any) -> None:
        self.store = store
        self.ids = [store.add(user_id="u1", content=text, theme="coffee") for text in NOTES]
        store.upsert_fact(user_id="u1", category="profile", key="home_city", value="Berlin")


class TestRetrieverStandard(SeededStore, RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[NaviMemoryRetriever]:
        return NaviMemoryRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"store": self.store, "user_id": "u1"}

    @property
    def retriever_query_example(self) -> str:
        return "coffee"


EXAMPLES = {
    "memory_search": lambda ids: {"query": "coffee", "limit": 3},
    "memory_add_note": lambda ids: {"content": "The user's dog is called Rex", "theme": "pets"},
    "memory_save_fact": lambda ids: {"category": "preferences", "key": "coffee_order", "value": "oat latte"},
    "memory_get": lambda ids: {"item_id": ids[0]},
    "memory_archive": lambda ids: {"item_id": ids[1]},
    "memory_forget": lambda ids: {"key": "home_city"},
    "memory_list_themes": lambda ids: {},
}


class ToolCase(SeededStore):
    tool_name: str

    @property
    def tool_constructor(self) -> BaseTool:
        (tool,) = NaviMemoryToolkit(store=self.store, user_id="u1", include=[self.tool_name]).get_tools()
        return tool

    @property
    def tool_invoke_params_example(self) -> dict:
        return EXAMPLES[self.tool_name](self.ids)


def _suites() -> dict[str, type]:
    out = {}
    for name in EXAMPLES:
        slug = "".join(part.title() for part in name.split("_"))
        for base, kind in ((ToolsUnitTests, "Unit"), (ToolsIntegrationTests, "Integration")):
            cls = type(f"Test{slug}{kind}", (ToolCase, base), {"tool_name": name})
            out[cls.__name__] = cls
    return out


globals().update(_suites())
