"""Ingest throughput and search latency of a backend at growing sizes (``navi-memory bench latency``).

For each N: a fresh database, N items of ONE user with precomputed random vectors (fixed seed)
and short sentences drawn from a Zipf-like vocabulary (so the full-text index holds common and
rare terms), ingested with ``add_many`` in batches. Then the first search (it loads the vector
cache), a warm-up, and Q timed hybrid searches whose query vectors are precomputed
(``query_embedding=``), so no embedding model is ever called; then the same queries lexically,
on a store opened without embeddings. Only numpy and the standard library are used.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import Settings, parse_url
from ..errors import ConfigurationError
from ..progress import Progress
from ..retrieval.query import STOP_WORDS
from ..store import MemoryStore

USER = "bench-user"
THEMES = ("general", "work", "family", "health", "travel", "food", "music", "projects")
ZIPF_EXPONENT = 1.07
VOCABULARY_SIZE = 20_000
# The head of the vocabulary: real words in rough frequency order (function words first, as in text).
COMMON = """the to and of a in is that for it on with as was at be this have from or by not are but
user my prefers likes wants meeting project today tomorrow week time work team call email deadline
remember coffee morning evening weekend plan trip flight hotel book music song dinner lunch doctor
appointment birthday family daughter son wife husband friend office report budget review code server
database deploy release bug test python docs notes idea garden run gym health sleep diet tea pizza
vegan allergy peanuts travel paris london berlin tokyo train car bike rent house move school class
exam course read novel movie series game password account bank invoice tax insurance phone laptop
printer update backup cloud storage kitchen recipe bread cake gift anniversary holiday beach
mountain hiking camping dog cat vet walk park concert ticket museum language spanish german french""".split()
_ONSETS = ("b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "ch", "cl", "dr", "fl", "gr", "pl", "sh", "sl", "st", "th", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou")
_CODAS = ("", "", "", "n", "r", "s", "l", "t", "m", "nd", "st")


def _sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        scale = {"k": 1_000, "m": 1_000_000}.get(part[-1:], 1)
        try:
            value = int(float(part.rstrip("km")) * scale)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a size: {part!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"sizes must be positive, got {part!r}")
        sizes.append(value)
    return sizes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # dest bench_db: the global --db / $NAVI_MEMORY_URL name the user's real memory, never benchmarked
    parser.add_argument("--db", dest="bench_db", metavar="URL", default=None,
                        help="fresh database URL, '{n}' is replaced by N (default: a SQLite file in a temp dir;"
                             " the global --db and $NAVI_MEMORY_URL are not used)")
    parser.add_argument("--n", type=_sizes, default=_sizes("10000,100000"),
                        help="comma-separated item counts, e.g. 10000,100000 or 10k,100k")
    parser.add_argument("--queries", type=int, default=200, help="timed searches per N (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed searches before timing (default 20)")
    parser.add_argument("--dim", type=int, default=384, help="vector dimensions (default 384)")
    parser.add_argument("--batch", type=int, default=1000, help="items per add_many call (default 1000)")
    parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    parser.add_argument("--json", dest="json_out", metavar="OUT", default=None, help="also write the results here")


class Corpus:
    """A fixed vocabulary with Zipf-distributed word frequencies; texts and queries drawn from it."""

    def __init__(self, seed: int, size: int = VOCABULARY_SIZE, exponent: float = ZIPF_EXPONENT) -> None:
        rng = np.random.default_rng([seed, 0])
        words = list(dict.fromkeys(COMMON))
        seen = set(words)
        while len(words) < size:
            word = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))]
                           for _ in range(int(rng.integers(2, 4)))) + _CODAS[rng.integers(len(_CODAS))]
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = np.array(words, dtype=object)
        weights = 1.0 / np.arange(1, size + 1) ** exponent
        self._cdf = np.cumsum(weights / weights.sum())
        content = np.array([w not in STOP_WORDS for w in words])
        self._query_cdf = np.cumsum(np.where(content, weights, 0.0) / weights[content].sum())

    def _draw(self, rng: np.random.Generator, cdf: np.ndarray, count: int) -> np.ndarray:
        return self.words[np.minimum(np.searchsorted(cdf, rng.random(count)), len(cdf) - 1)]

    def texts(self, rng: np.random.Generator, count: int, lo: int = 6, hi: int = 24) -> list[str]:
        """``count`` short notes of ``lo``..``hi`` words (one sentence)."""
        lengths = rng.integers(lo, hi + 1, size=count)
        words = self._draw(rng, self._cdf, int(lengths.sum()))
        out, start = [], 0
        for length in lengths:
            sentence = " ".join(words[start:start + length])
            out.append(sentence[:1].upper() + sentence[1:] + ".")
            start += length
        return out

    def queries(self, rng: np.random.Generator, count: int) -> list[str]:
        """``count`` queries of 2..5 distinct content words (Zipf-weighted, stop words excluded)."""
        out = []
        for _ in range(count):
            want = int(rng.integers(2, 6))
            words: dict[str, None] = {}
            while len(words) < want:
                words.update(dict.fromkeys(self._draw(rng, self._query_cdf, want - len(words))))
            out.append(" ".join(words))
        return out


def _stats(ms: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(ms, dtype=float)
    return {"p50": round(float(np.percentile(arr, 50)), 3), "p95": round(float(np.percentile(arr, 95)), 3),
            "mean": round(float(arr.mean()), 3)}


def _timed_search(store: MemoryStore, query: str, vector: np.ndarray | None) -> float:
    start = time.perf_counter()
    store.search(query, user_id=USER, query_embedding=vector)
    return (time.perf_counter() - start) * 1000.0


def _search_series(store: MemoryStore, label: str, queries: list[str], vectors: list[np.ndarray | None],
                   warmup: int) -> list[float]:
    times, progress = [], Progress(label, len(queries))
    for index, (query, vector) in enumerate(zip(queries, vectors)):
        elapsed = _timed_search(store, query, vector)
        if index >= warmup:
            times.append(elapsed)
        progress(index + 1)
    progress.close()
    return times


def _open(url: str, model: str | None) -> MemoryStore:
    settings = Settings(url=url, embeddings="none")  # the environment must not change what is measured
    return MemoryStore.open(url, embeddings=False, embedding_model=model, settings=settings)


def run_size(url: str, n: int, args: argparse.Namespace, corpus: Corpus) -> dict[str, Any]:
    """Ingest ``n`` items into the fresh database at ``url`` and time searches on it."""
    if parse_url(url).path == ":memory:":
        raise ConfigurationError("the latency benchmark needs a database file (two stores open it)")
    model = f"bench-{args.dim}"
    store = _open(url, model)
    lexical = None
    try:
        if store.list_users():
            raise ConfigurationError(f"{url} already holds data; the benchmark needs a fresh database")
        text_rng = np.random.default_rng([args.seed, n, 1])
        vec_rng = np.random.default_rng([args.seed, n, 2])
        ingest_s, done, progress = 0.0, 0, Progress(f"n={n} ingest", n)
        while done < n:
            size = min(args.batch, n - done)
            texts = corpus.texts(text_rng, size)
            vectors = vec_rng.standard_normal((size, args.dim), dtype=np.float32)
            themes = text_rng.integers(len(THEMES), size=size)
            batch = [{"user_id": USER, "content": text, "theme": THEMES[theme], "embedding": vec}
                     for text, vec, theme in zip(texts, vectors, themes)]
            start = time.perf_counter()
            store.add_many(batch)
            ingest_s += time.perf_counter() - start
            done += size
            progress(done)
        progress.close()

        query_rng = np.random.default_rng([args.seed, n, 3])
        total = args.warmup + args.queries
        queries = corpus.queries(query_rng, total + 1)
        qvecs = list(query_rng.standard_normal((total + 1, args.dim), dtype=np.float32))
        first_ms = _timed_search(store, queries[0], qvecs[0])  # builds the user's vector index
        hybrid = _search_series(store, f"n={n} search", queries[1:], qvecs[1:], args.warmup)

        lexical = _open(url, None)
        plain = _search_series(lexical, f"n={n} lexical", queries[1:], [None] * total, args.warmup)
    finally:
        store.close()
        if lexical is not None:
            lexical.close()
    return {"n": n, "ingest_items_per_s": round(n / ingest_s, 1), "search_ms": _stats(hybrid),
            "lexical_search_ms": _stats(plain), "first_search_ms": round(first_ms, 3)}


def _environment() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "machine": platform.machine(), "processor": platform.processor() or None,
            "python": platform.python_version(), "numpy": np.__version__, "sqlite": sqlite3.sqlite_version}


def format_table(report: dict[str, Any]) -> str:
    head = (f"{'N':>9} {'ingest/s':>10} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}"
            f" {'lex p50':>8} {'lex p95':>8}")
    title = (f"backend {report['backend']}, dim {report['dim']}, {report['queries']} timed queries"
             f" after {report['warmup']} warm-up, add_many batches of {report['batch']}")
    lines = [title, head]
    for r in report["results"]:
        s, lx = r["search_ms"], r["lexical_search_ms"]
        lines.append(f"{r['n']:>9,} {r['ingest_items_per_s']:>10,.0f} {r['first_search_ms']:>9.1f}"
                     f" {s['p50']:>8.2f} {s['p95']:>8.2f} {s['mean']:>8.2f} {lx['p50']:>8.2f} {lx['p95']:>8.2f}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark for every size in ``args.n``; print a table, write JSON if asked, return the report."""
    if args.queries < 1 or args.warmup < 0 or args.dim < 1 or args.batch < 1:
        raise ConfigurationError("--queries, --dim and --batch must be positive, --warmup not negative")
    db = getattr(args, "bench_db", None)
    if db and "{n}" not in db and len(args.n) > 1:
        raise ConfigurationError("put '{n}' in --db when benchmarking several sizes: each needs a fresh database")
    corpus = Corpus(args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="navi-bench-") as tmp:
        for n in args.n:
            url = db.replace("{n}", str(n)) if db else f"sqlite:///{Path(tmp) / f'bench-{n}.db'}"
            results.append(run_size(url, n, args, corpus))
    report = {"backend": parse_url(db).scheme if db else "sqlite", "dim": args.dim, "results": results,
              "queries": args.queries, "warmup": args.warmup, "batch": args.batch, "seed": args.seed,
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "environment": _environment()}
    print(format_table(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="navi-memory bench latency", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
