"""Search arguments fixed in an adapter (``search_kwargs``) are checked when the adapter is set up:
at prompt time a bad one would only be logged, and every prompt would go without memory."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from navi_memory import ValidationError, prompt
from navi_memory.integrations import llamaindex
from navi_memory.integrations._tools import SEARCH_FILTERS
from navi_memory.integrations.langchain import NaviMemoryMiddleware, NaviMemoryRunnable
from navi_memory.operations.search import PRESET_ARGUMENTS, check_preset

U = "u1"

BAD = {
    "a misspelt name": ({"theme": "coffee", "limt": 3}, "not a search argument: 'limt'"),
    "the page size": ({"limit": 3}, "not a search argument: 'limit'"),
    "the user": ({"user_id": "u2"}, "not a search argument: 'user_id'"),
    "an unknown time zone": ({"timezone": "Mars/Olympus"}, "unknown time zone"),
    "an unknown fusion": ({"fusion": "magic"}, "invalid fusion"),
    "an unknown recency": ({"recency": "old"}, "invalid recency"),
    "an unknown item type": ({"types": ["pref"]}, "invalid type"),
    "a status": ({"status": "deleted"}, "invalid status"),
    "a weight above 1": ({"context_weight": 2}, "context_weight must be a number from 0 to 1"),
    "a weight as text": ({"semantic_weight": "0.5"}, "semantic_weight must be a number from 0 to 1"),
    "a bad floor": ({"min_similarity": -0.1}, "min_similarity must be a number from 0 to 1"),
    "a bad min_score": ({"min_score": 1.5}, "min_score must be a number from 0 to 1"),
    "a metadata filter": ({"filters": {"kind": {"$near": 1}}}, "near"),
    "negative days": ({"recency_days": -3}, "recency_days"),
    "person hints not names": ({"person_hints": [1, 2]}, "person_hints"),
}

GOOD: dict[str, Any] = {"theme": "coffee", "types": ["preference"], "recency_days": 30, "status": "any",
                        "person": "Tom", "person_hints": ["Tom"], "fusion": "rrf", "recency": "neutral",
                        "include_expired": True, "context_weight": 0, "semantic_weight": 0.5,
                        "min_similarity": 0.2, "min_score": 0.2, "namespace_prefix": ["notes"], "agent_id": "planner",
                        "run_id": "r1", "filters": {"kind": "pref"}, "timezone": "Europe/Lisbon"}


def test_every_search_argument_a_caller_may_fix_passes_when_good():
    assert set(GOOD) == set(PRESET_ARGUMENTS) and set(SEARCH_FILTERS) <= set(PRESET_ARGUMENTS)
    check_preset(GOOD)
    check_preset({})


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_preset_is_refused_naming_the_argument(case):
    arguments, message = BAD[case]
    with pytest.raises(ValidationError, match=message):
        check_preset(arguments)


ADAPTERS: dict[str, Callable[..., Any]] = {
    "runnable": lambda store, kwargs: NaviMemoryRunnable(store=store, user_id=U, search_kwargs=kwargs),
    "middleware": lambda store, kwargs: NaviMemoryMiddleware(store=store, user_id=U, search_kwargs=kwargs),
    "llamaindex block": lambda store, kwargs: llamaindex.NaviMemoryBlock(store=store, user_id=U,
                                                                         search_kwargs=kwargs),
    "llamaindex retriever": lambda store, kwargs: llamaindex.NaviMemoryRetriever(store, U, **kwargs),
}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_the_adapters_refuse_a_bad_preset_when_set_up(store, adapter):
    make = ADAPTERS[adapter]
    for arguments, message in (BAD["an unknown time zone"], BAD["a status"], BAD["an unknown fusion"]):
        with pytest.raises(ValueError, match=message):  # pydantic's error or ours: both ValueErrors
            make(store, arguments)
    make(store, {"timezone": "Europe/Lisbon", "theme": "coffee"})


def test_a_good_preset_still_reaches_the_search(store):
    store.add(user_id=U, content="The user drinks a flat white with oat milk.", theme="coffee")
    store.add(user_id=U, content="The user drinks green tea in the afternoon.", theme="tea")
    ask = [SystemMessage("You help."), HumanMessage("What does the user drink?")]
    runnable = NaviMemoryRunnable(store=store, user_id=U, min_similarity=0,
                                  search_kwargs={"theme": "coffee", "speaker": "Tom", "timezone": "Europe/Lisbon"})
    [block] = [m.content for m in runnable.invoke(ask) if prompt.RELEVANT_HEADING in str(m.content)]
    assert "flat white" in block and "green tea" not in block
