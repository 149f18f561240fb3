"""A cross-encoder exported to ONNX, run with onnxruntime and a Hugging Face ``tokenizers`` file.

No PyTorch needed: a folder with ``model.onnx`` and ``tokenizer.json`` (what optimum or a
``torch.onnx`` export of a BERT-style cross-encoder such as ms-marco-MiniLM writes, int8
quantised or not) is enough. Use it as ``MemoryStore.open(reranker=OnnxCrossEncoder(folder))``
or ``NAVI_MEMORY_RERANKER=onnx:<folder>``; needs the ``rerank`` extra.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Generic, Hashable, Sequence, TypeVar

from .errors import ConfigurationError, RerankError

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
CACHE_SIZE = 4096  # pair scores and candidate tokenisations kept (each LRU)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class OnnxCrossEncoder:
    """``predict(pairs)`` -> one relevance score per ``(query, text)`` pair (the model's logit;
    higher is more relevant). Loads the model on first use; safe to share between threads.
    ``threads``: pairs scored at once, each on one core (default: the CPU count, at most 8).
    ``cache_size``: scores of the last pairs and tokens of the last texts kept (0: none). A pair
    always runs alone, so a kept score is the one a new run would give, to the bit."""

    def __init__(self, folder: str | Path, max_length: int = 512, threads: int | None = None,
                 cache_size: int = CACHE_SIZE) -> None:
        missing = [m for m in ("onnxruntime", "tokenizers") if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigurationError(f"an ONNX reranker needs {' and '.join(missing)}:"
                                     " pip install 'navi-memory[rerank]'")
        self.folder = Path(folder).expanduser()
        absent = [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (self.folder / name).is_file()]
        if absent:
            raise ConfigurationError(f"ONNX reranker folder {str(self.folder)!r} has no {' or '.join(absent)}")
        if "usearch.compiled" in sys.modules and "onnxruntime" not in sys.modules and _crashes_after_usearch():
            raise ConfigurationError("onnxruntime >= 1.23 crashes when loaded after usearch (whose wheel exports a"
                                     " static libstdc++): import onnxruntime before usearch")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 8:
            raise ConfigurationError("max_length must be an integer of at least 8 tokens")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ConfigurationError("threads must be a positive integer")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigurationError("cache_size must be a non-negative integer")
        self.max_length = max_length
        self.threads = threads or min(os.cpu_count() or 1, 8)
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, list[tuple[str, str, Any]]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._scores: _Lru[tuple[str, str], float] = _Lru(cache_size)
        self._tokens: _Lru[str, Any] = _Lru(cache_size)  # a text's encoding without special tokens
        self.runs = 0  # pairs the model has run (the others came from the cache)
        import onnxruntime  # noqa: F401  now: before anything loads usearch (see navi_memory.ann)

    def __repr__(self) -> str:
        return f"OnnxCrossEncoder({str(self.folder)!r})"

    def _load(self) -> tuple[Any, Any, list[tuple[str, str, Any]]]:
        """The session, the tokenizer and the model's inputs (name, encoding field, dtype)."""
        with self._lock:
            if self._loaded is None:
                import numpy as np
                import onnxruntime
                from tokenizers import Tokenizer

                options = onnxruntime.SessionOptions()
                # one core per run, several runs at once: a short pair is too small to split well
                # across cores (30 LoCoMo pairs, 2 cores: p50 238-277 ms on two intra-op threads,
                # 211-227 ms two pairs at a time; with a test suite running beside it, 370 vs 194)
                options.intra_op_num_threads = 1
                session = onnxruntime.InferenceSession(str(self.folder / MODEL_FILE), options,
                                                       providers=["CPUExecutionProvider"])
                tokenizer = Tokenizer.from_file(str(self.folder / TOKENIZER_FILE))
                tokenizer.no_padding()  # exports often pad to 512; a pair runs alone, unpadded
                tokenizer.enable_truncation(self.max_length, strategy="longest_first")
                unknown = [i.name for i in session.get_inputs() if i.name not in _FEEDS]
                if unknown:
                    raise RerankError(f"{self!r}: the model wants inputs {unknown}; a cross-encoder"
                                      f" takes {sorted(_FEEDS)}")
                inputs = [(i.name, _FEEDS[i.name], np.int32 if i.type == "tensor(int32)" else np.int64)
                          for i in session.get_inputs()]
                self._loaded = (session, tokenizer, inputs)
                if self.threads > 1:
                    self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="navi-memory-rerank")
            return self._loaded

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        session, tokenizer, inputs = self._load()
        known = {pair: score for pair in pairs if (score := self._scores.get(pair)) is not None}
        todo = list(dict.fromkeys(pair for pair in pairs if pair not in known))
        # One pair per run, never a batch: an int8 model quantises its activations with one scale
        # per run, so a batch moved scores (ms-marco-MiniLM-L-12 int8, 8 LoCoMo pairs: by up to 1.1
        # logits as two length-sorted batches of 4, median 0.48) and a text's score would depend on
        # the other candidates. Nor was it faster (30 pairs, 2 cores: p50 270 ms one by one, 369 ms
        # as one batch; 8 pairs: 106 ms as two batches of 4 against 107 ms one by one, longest first).
        encoded = self._encode(tokenizer, todo)
        if self._pool is None or len(encoded) < 2:
            fresh = [_logit(session, inputs, e) for e in encoded]
        else:  # longest first, so the cores finish together (8 LoCoMo pairs, 2 cores: 14% less time)
            longest = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].ids))
            by_index = dict(zip(longest, self._pool.map(lambda i: _logit(session, inputs, encoded[i]), longest)))
            fresh = [by_index[i] for i in range(len(encoded))]
        with self._lock:
            self.runs += len(fresh)
        for pair, score in zip(todo, fresh):
            self._scores.put(pair, score)
        known.update(zip(todo, fresh))
        return [known[pair] for pair in pairs]

    def _encode(self, tokenizer: Any, pairs: list[tuple[str, str]]) -> list[Any]:
        """What ``tokenizer.encode(query, text)`` gives, from each text's tokens kept across calls
        (a store's candidates come back search after search) and each query's tokenised once."""
        queries: dict[str, Any] = {}
        special = tokenizer.num_special_tokens_to_add(True)
        out = []
        for query, text in pairs:
            if query not in queries:
                queries[query] = tokenizer.encode(query, add_special_tokens=False)
            tokens = self._tokens.get(text)
            if tokens is None:
                tokens = tokenizer.encode(text, add_special_tokens=False)
                self._tokens.put(text, tokens)
            if len(queries[query].ids) + len(tokens.ids) + special > self.max_length:
                out.append(tokenizer.encode(query, text))  # its own truncation: where to cut ties differs
            else:
                out.append(tokenizer.post_process(queries[query], tokens, add_special_tokens=True))
        return out


class _Lru(Generic[K, V]):
    """The last ``size`` values put, safe between threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        if self.size == 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


def _crashes_after_usearch() -> bool:
    from importlib.metadata import version

    major, minor = (int(p) for p in version("onnxruntime").split(".")[:2])
    return (major, minor) >= (1, 23)


_FEEDS = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}


def _logit(session: Any, inputs: list[tuple[str, str, Any]], encoded: Any) -> float:
    import numpy as np

    feed = {name: np.array([getattr(encoded, field)], dtype=dtype) for name, field, dtype in inputs}
    out = np.asarray(session.run(None, feed)[0], dtype=np.float64)
    if out.size != 1:
        raise RerankError(f"a cross-encoder gives one score per pair; this model gives shape {out.shape}")
    return float(out.reshape(-1)[0])
