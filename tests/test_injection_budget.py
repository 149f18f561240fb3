"""The relevant-memory block of the adapters fits a token budget, per store and per adapter."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from navi_memory import ConfigurationError, Settings, prompt
from navi_memory.integrations.langchain import NaviMemoryRunnable

U = "u1"


@pytest.fixture
def coffee(store):
    for n in range(10):
        store.add(user_id=U, content=f"Coffee note {n}: the user likes a flat white with oat milk in the morning.")
    return store


def relevant(messages) -> str:
    [block] = [m.content for m in messages if prompt.RELEVANT_HEADING in str(m.content)]
    return block


def test_the_adapter_injects_what_fits_its_budget(coffee):
    ask = [SystemMessage("You help."), HumanMessage("What coffee does the user like?")]
    full = relevant(NaviMemoryRunnable(store=coffee, user_id=U, k=10, min_similarity=0).invoke(ask))
    small = relevant(NaviMemoryRunnable(store=coffee, user_id=U, k=10, min_similarity=0, max_tokens=90).invoke(ask))
    assert full.count("\n- ") == 10 and prompt.approximate_tokens(full) <= coffee.settings.injection_tokens
    assert 1 <= small.count("\n- ") < 10 and prompt.approximate_tokens(small) <= 90
    words = lambda text: len(text.split())  # noqa: E731
    counted = relevant(NaviMemoryRunnable(store=coffee, user_id=U, k=10, min_similarity=0, max_tokens=60,
                                          token_counter=words).invoke(ask))
    assert words(counted) <= 60


def test_the_budget_comes_from_the_environment():
    env = {"NAVI_MEMORY_URL": "sqlite:////tmp/x.db"}
    assert Settings.from_env(env).injection_tokens == prompt.INJECTION_TOKENS
    assert Settings.from_env({**env, "NAVI_MEMORY_INJECTION_TOKENS": "150"}).injection_tokens == 150
    for bad in ("0", "-5", "many"):
        with pytest.raises(ConfigurationError, match="NAVI_MEMORY_INJECTION_TOKENS"):
            Settings.from_env({**env, "NAVI_MEMORY_INJECTION_TOKENS": bad})


def test_a_bad_adapter_budget_is_refused(store):
    with pytest.raises(ValueError):
        NaviMemoryRunnable(store=store, user_id=U, max_tokens=0)


def test_injected_memories_are_dated_in_the_users_days(store, clock):
    from datetime import datetime, timezone

    store.add(user_id=U, content="The user had dinner with Ana at the harbour.",
              observed_at=datetime(2026, 11, 26, 23, 30, tzinfo=timezone.utc))
    ask = [SystemMessage("You help."), HumanMessage("Who did the user have dinner with?")]
    dated = lambda runnable: relevant(runnable.invoke(ask))  # noqa: E731
    assert "2026-11-26]" in dated(NaviMemoryRunnable(store=store, user_id=U, min_similarity=0))  # the store's UTC
    store.set_user_timezone("Asia/Tokyo", user_id=U)  # 08:30 the next morning there
    assert "2026-11-27]" in dated(NaviMemoryRunnable(store=store, user_id=U, min_similarity=0))
    preset = NaviMemoryRunnable(store=store, user_id=U, min_similarity=0, search_kwargs={"timezone": "UTC"})
    assert "2026-11-26]" in dated(preset)  # a zone fixed in the adapter wins
