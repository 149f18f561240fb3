"""The conversation memory pipeline: sessions -> transcript -> extraction (LLM or rules) -> dedup ->
facts, notes and turn chunks -> summary.

Modules: ``sessions`` (message formats), ``transcript`` (rendering and truncation), ``rules`` (the
no-LLM extractor and pre-filter), ``extract`` (reply parsing and the repair retry), ``dedup``
(same or equivalent facts), ``summary``, ``triggers``, ``prompts``, ``llm`` (the chat model) and
``background`` (extraction off the caller's path). The store operations that tie them together are
in ``navi_memory.operations.sessions``. Nothing here imports LangChain until a chat model is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ..config import Settings
from ..errors import ValidationError


@dataclass
class PipelineOptions:
    """How the pipeline behaves; defaults come from ``Settings`` (the environment)."""

    extract_every: int = 5  # user messages between in-conversation extractions (0: never)
    stale_minutes: float = 30.0  # idle time after which a session is processed
    dedup_threshold: float = 0.8  # cosine similarity that makes two facts candidates for one
    llm_dedup: bool = True  # let the chat model decide ambiguous pairs (one call for all of them)
    store_turns: bool = True  # keep every conversation turn as a searchable chunk
    background: bool = True  # triggers run extraction off the caller's path
    max_transcript_chars: int = 12_000
    context_messages: int = 4  # already processed messages shown before the new ones
    max_attempts: int = 5  # failed runs in a row before stale processing leaves a session alone
    lease_minutes: float = 10.0  # a "running" claim older than this is taken over
    stale_batch: int = 20  # stale sessions handled per trigger

    @classmethod
    def from_settings(cls, settings: Settings) -> "PipelineOptions":
        return cls(extract_every=settings.extract_every, stale_minutes=settings.stale_minutes,
                   dedup_threshold=settings.dedup_threshold)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value) or value < 0:
                raise ValidationError(f"pipeline option {f.name} must be a finite number of at least 0")
        if not 0 < self.dedup_threshold <= 1:
            raise ValidationError("dedup_threshold must be in (0, 1]")


__all__ = ["PipelineOptions"]
