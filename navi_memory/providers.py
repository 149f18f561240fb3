"""Embedding and chat models of any LangChain provider, chosen by a ``provider:model`` name in the
environment (``NAVI_MEMORY_EMBEDDINGS=openai:text-embedding-3-small``,
``NAVI_MEMORY_CHAT_MODEL=anthropic:claude-haiku-4-5``), made by LangChain's own ``init_embeddings``
/ ``init_chat_model`` (the ``langchain`` extra and the provider's package, e.g. ``langchain-openai``).

``NAVI_MEMORY_EMBEDDING_URL`` / ``NAVI_MEMORY_CHAT_URL`` point an OpenAI-style client at any server
speaking that API (llama.cpp's server, vLLM, LM Studio, Ollama's ``/v1``); ``..._API_KEY`` give
the keys, which never appear in logs, errors or reprs. Ollama itself keeps its own client
(``embeddings.py``, ``pipeline/llm.py``): a bare chat model name, or ``ollama:...``, is Ollama's.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from .config import Settings
from .errors import ConfigurationError

# LangChain's providers, less Ollama (served by langchain-ollama directly)
EMBEDDING_PROVIDERS = ("openai", "azure_openai", "azure_ai", "bedrock", "cohere", "google_genai", "google_vertexai",
                       "huggingface", "mistralai")
CHAT_PROVIDERS = ("openai", "azure_openai", "azure_ai", "anthropic", "bedrock", "bedrock_converse", "cohere",
                  "deepseek", "fireworks", "google_genai", "google_vertexai", "groq", "huggingface", "mistralai",
                  "nvidia", "openrouter", "perplexity", "together", "xai")
_OPENAI_STYLE = ("openai", "azure_openai")


def split_model(name: str, providers: tuple[str, ...]) -> tuple[str, str] | None:
    """(provider, model) when ``name`` is ``provider:model`` with a provider of ``providers``, else None
    (``llama3.2:3b`` is an Ollama model with a tag, not a provider)."""
    provider, sep, model = name.partition(":")
    provider = provider.strip().lower()
    return (provider, model.strip()) if sep and provider in providers else None


def _require_langchain(what: str) -> None:
    if importlib.util.find_spec("langchain") is None:
        raise ConfigurationError(f"{what} needs the 'langchain' extra: pip install 'navi-memory[langchain]'"
                                 " and the provider's package (e.g. langchain-openai)")


def _connection(url: str | None, key: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if url:
        out["base_url"] = url
    if key:
        out["api_key"] = key
    return out


def langchain_embeddings(settings: Settings, provider: str, model: str) -> Any:
    """The provider's LangChain ``Embeddings`` for ``model``; ConfigurationError if it cannot be made."""
    _require_langchain(f"the {provider} embeddings")
    from langchain.embeddings import init_embeddings

    kwargs = _connection(settings.embedding_url, settings.embedding_api_key)
    if provider in _OPENAI_STYLE:
        kwargs["timeout"] = settings.embedding_timeout
        if settings.embedding_url:  # another server: it takes the text itself, not OpenAI's token ids
            kwargs["check_embedding_ctx_length"] = False
    try:
        return init_embeddings(model, provider=provider, **kwargs)
    except ImportError as exc:
        raise ConfigurationError(f"the {provider} embeddings need their LangChain package: {exc}") from None


def langchain_chat(settings: Settings, provider: str, model: str) -> Any:
    """The provider's LangChain chat model for ``model`` at temperature 0; ConfigurationError if it
    cannot be made."""
    _require_langchain(f"the {provider} chat model")
    from langchain.chat_models import init_chat_model

    kwargs = _connection(settings.chat_url, settings.chat_api_key)
    if provider in (*_OPENAI_STYLE, "anthropic"):
        kwargs["timeout"] = settings.chat_timeout
    try:
        return init_chat_model(model, model_provider=provider, temperature=0, **kwargs)
    except ImportError as exc:
        raise ConfigurationError(f"the {provider} chat model needs its LangChain package: {exc}") from None
