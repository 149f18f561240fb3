"""An optional second ranking stage: a model that reads the query and each candidate together.

Off by default. A store takes one per store (``MemoryStore.open(reranker=...)``,
``store.set_reranker(...)``) or from ``NAVI_MEMORY_RERANKER``. Accepted:

* a callable ``(query, texts) -> scores`` (one number per text, higher is better);
* a sentence-transformers ``CrossEncoder`` (anything with ``predict(pairs)``);
* a LangChain ``BaseDocumentCompressor`` (anything with ``compress_documents(documents, query)``,
  e.g. ``CrossEncoderReranker``): its order is the score, and documents it drops rank last;
* a LlamaIndex node postprocessor (anything with ``postprocess_nodes(nodes, query_str=...)``, e.g.
  ``SentenceTransformerRerank``): the scores it gives the nodes (its order where it gives none),
  nodes it drops rank last;
* a name: ``cross-encoder:<model>`` loads a sentence-transformers ``CrossEncoder`` on first use
  (a local path, or a model name the Hugging Face cache holds); ``onnx:<folder>`` a cross-encoder
  exported to ONNX (``model.onnx`` + ``tokenizer.json``, run by onnxruntime, no PyTorch:
  ``navi_memory.onnx_reranker``); ``none`` or empty turns it off.

The search re-orders its best ``depth`` candidates by a blend of their first-stage score and the
model's (``retrieval.stage.blend``: each scaled over those candidates, the model's share
``weight``, 0.5 by default, 1 for the model's order alone); the others keep their order after
them. ``resolve_reranker(model, depth=..., weight=...)`` makes one with other values. A model
that fails raises ``RerankError``: a second stage the user asked for is not skipped silently.

A reranker with ``first`` and ``enough`` reads its depth in two steps: the best ``first``
candidates, then the rest only when none of those scored ``enough`` (``retrieval.stage.reads_on``).
``onnx:<folder>`` does so (first 8, a logit of 2: ms-marco cross-encoders' scale, to a depth of
20), which keeps the quality and reads 8 candidates in most searches (docs/benchmarks.md,
"Reranking stage"); ``resolve_reranker(..., adaptive=False)`` reads all of its depth (30) at once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import threading
from typing import Any, Callable, Sequence

from .errors import ConfigurationError, RerankError

DEFAULT_DEPTH = 30  # candidates the model reads per search
DEFAULT_WEIGHT = 0.5  # the model's share of the final order (retrieval.stage.blend); chosen on LoCoMo dev
ONNX_FIRST, ONNX_ENOUGH = 8, 2.0  # an onnx: model reads 8, the rest of its depth when none scored 2
# ... to a depth of 20: leave one conversation out it keeps R@5 and R@10 (0.759 / 0.812 against 0.754 /
# 0.812 at 30) and the searches that read on pay 12 pairs, not 22 (docs/benchmarks.md)
ONNX_DEPTH = 20
CROSS_ENCODER = "cross-encoder:"
ONNX = "onnx:"

Scorer = Callable[[str, list[str]], Sequence[float]]


class Reranker:
    """A scorer plus its name, how many candidates it reads and its share of their final order
    (``weight`` 1: the model's order alone). With ``first`` and ``enough``: it reads the best
    ``first`` candidates, and the rest of ``depth`` only when none of those scored ``enough``."""

    def __init__(self, scorer: Scorer, name: str, depth: int = DEFAULT_DEPTH, weight: float = DEFAULT_WEIGHT,
                 first: int | None = None, enough: float | None = None) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ConfigurationError("reranker depth must be a positive integer")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 1:
            raise ConfigurationError("reranker weight must be a number above 0 and at most 1")
        if (first is None) != (enough is None):
            raise ConfigurationError("reranker first and enough go together")
        if first is not None and (isinstance(first, bool) or not isinstance(first, int) or first < 1):
            raise ConfigurationError("reranker first must be a positive integer")
        if enough is not None and (isinstance(enough, bool) or not isinstance(enough, (int, float))
                                   or not math.isfinite(enough)):
            raise ConfigurationError("reranker enough must be a finite number")
        self._scorer = scorer
        self.name = name
        self.depth = depth
        self.weight = float(weight)
        self.first = first
        self.enough = None if enough is None else float(enough)

    def __repr__(self) -> str:
        steps = f", first={self.first}, enough={self.enough}" if self.first is not None else ""
        return f"Reranker({self.name!r}, depth={self.depth}, weight={self.weight}{steps})"

    def to_dict(self) -> dict[str, Any]:
        """What reports show of it: name, depth, weight and (reading in two steps) first and enough."""
        steps = {"first": self.first, "enough": self.enough} if self.first is not None else {}
        return {"name": self.name, "depth": self.depth, "weight": self.weight, **steps}

    def score(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        try:
            raw = self._scorer(query, list(texts))
            scores = [float(s) for s in raw]
        except (ConfigurationError, RerankError):
            raise
        except Exception as exc:  # any model library's error: the caller sees one kind
            raise RerankError(f"reranker {self.name} failed: {type(exc).__name__}: {exc}") from exc
        if len(scores) != len(texts):
            raise RerankError(f"reranker {self.name} gave {len(scores)} scores for {len(texts)} texts")
        return [s if not math.isnan(s) else -math.inf for s in scores]

    async def ascore(self, query: str, texts: list[str]) -> list[float]:
        return await asyncio.to_thread(self.score, query, texts)


def _pairs_scorer(model: Any) -> Scorer:
    def score(query: str, texts: list[str]) -> Sequence[float]:
        return list(model.predict([(query, t) for t in texts]))
    return score


def _compressor_scorer(compressor: Any) -> Scorer:
    def score(query: str, texts: list[str]) -> Sequence[float]:
        from langchain_core.documents import Document

        docs = [Document(page_content=t, metadata={"navi_rank": i}) for i, t in enumerate(texts)]
        kept = list(compressor.compress_documents(docs, query))
        out = [-math.inf] * len(texts)
        for position, doc in enumerate(kept):  # earlier = better; dropped documents stay at -inf
            index = doc.metadata.get("navi_rank")
            if isinstance(index, int) and 0 <= index < len(texts):
                out[index] = float(len(kept) - position)
        return out
    return score


def _postprocessor_scorer(postprocessor: Any) -> Scorer:
    def score(query: str, texts: list[str]) -> Sequence[float]:
        from llama_index.core.schema import NodeWithScore, TextNode

        nodes = [NodeWithScore(node=TextNode(text=t, id_=f"navi-rank-{i}")) for i, t in enumerate(texts)]
        kept = list(postprocessor.postprocess_nodes(nodes, query_str=query))
        by_score = all(n.score is not None for n in kept)
        out = [-math.inf] * len(texts)
        for position, node in enumerate(kept):
            index = node.node.node_id.removeprefix("navi-rank-")
            if index.isdigit() and int(index) < len(texts):
                out[int(index)] = float(node.score) if by_score else float(len(kept) - position)
        return out
    return score


def _cross_encoder(model: str) -> Scorer:
    if importlib.util.find_spec("sentence_transformers") is None:
        raise ConfigurationError("a cross-encoder reranker needs the 'local' extra: pip install 'navi-memory[local]'")
    lock = threading.Lock()
    loaded: list[Any] = []

    def score(query: str, texts: list[str]) -> Sequence[float]:
        with lock:
            if not loaded:
                from sentence_transformers import CrossEncoder

                loaded.append(CrossEncoder(model, device="cpu"))
        return list(loaded[0].predict([(query, t) for t in texts]))
    return score


def resolve_reranker(choice: Any, env_choice: str | None = None, depth: int | None = None,
                     weight: float = DEFAULT_WEIGHT, adaptive: bool = True) -> Reranker | None:
    """A ``Reranker`` for ``choice`` (see the module doc); None falls back to ``env_choice``.
    ``depth`` None: 20 for an ``onnx:`` model reading in two steps, else 30 (``DEFAULT_DEPTH``).
    ``adaptive`` False: an ``onnx:`` model reads all ``depth`` candidates at once."""
    if choice is False:
        return None
    if isinstance(choice, Reranker):
        return choice
    if choice is None:
        choice = env_choice
    if choice is None or (isinstance(choice, str) and choice.strip().lower() in ("", "none")):
        return None
    if depth is None:
        depth = ONNX_DEPTH if adaptive and isinstance(choice, str) and choice.strip().startswith(ONNX) else DEFAULT_DEPTH
    if isinstance(choice, str):
        name = choice.strip()
        if name.startswith(ONNX) and name[len(ONNX):]:
            from .onnx_reranker import OnnxCrossEncoder

            steps = (ONNX_FIRST, ONNX_ENOUGH) if adaptive else (None, None)
            return Reranker(_pairs_scorer(OnnxCrossEncoder(name[len(ONNX):])), name, depth, weight, *steps)
        if not name.startswith(CROSS_ENCODER) or not name[len(CROSS_ENCODER):]:
            raise ConfigurationError(f"unknown reranker {name!r}: use 'cross-encoder:<model>', 'onnx:<folder>'"
                                     " or 'none'")
        return Reranker(_cross_encoder(name[len(CROSS_ENCODER):]), name, depth, weight)
    label = type(choice).__name__
    if callable(getattr(choice, "compress_documents", None)):
        return Reranker(_compressor_scorer(choice), label, depth, weight)
    if callable(getattr(choice, "postprocess_nodes", None)):
        return Reranker(_postprocessor_scorer(choice), label, depth, weight)
    if callable(getattr(choice, "predict", None)):
        return Reranker(_pairs_scorer(choice), label, depth, weight)
    if callable(choice):
        return Reranker(choice, getattr(choice, "__name__", label), depth, weight)
    raise ConfigurationError("reranker must be a callable (query, texts) -> scores, a CrossEncoder, a LangChain"
                             " document compressor, a LlamaIndex node postprocessor, 'cross-encoder:<model>',"
                             " 'onnx:<folder>' or None")
