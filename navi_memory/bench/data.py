"""Synthetic data for the benchmarks: Zipf-like notes, vectors, users and queries (numpy + stdlib).

Texts: short sentences from a 20,000-word vocabulary with Zipf-like frequencies, so a full-text
index holds common and rare terms. Vectors: ``gaussian`` (iid normal: no structure at all, the
worst case for any approximate index) or ``lowrank`` (a 32-dimensional latent factor mapped into
the full size plus isotropic noise: nearest neighbours exist, as with real text embeddings).
Layouts: ``one`` (every item belongs to one user), ``spread`` (items drawn uniformly over
``users`` users; each query asks as a random one of them) or ``skewed`` (user sizes follow
1/rank, so a few users hold large shares; each query asks as the owner of a random item, so
large users ask more often). Everything derives from the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ..retrieval.query import STOP_WORDS

USER = "bench-user"
LAYOUTS = ("one", "spread", "skewed")
VECTOR_KINDS = ("gaussian", "lowrank")
LATENT_RANK, LATENT_NOISE = 32, 0.5

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



class Vectors:
    """Vector generator of one kind; ``lowrank`` shares one latent basis between items and queries."""

    def __init__(self, kind: str, dim: int, seed: int) -> None:
        if kind not in VECTOR_KINDS:
            raise ValueError(f"vectors must be one of {VECTOR_KINDS}")
        self.kind, self.dim = kind, dim
        basis_rng = np.random.default_rng([seed, 7])
        self._basis = basis_rng.standard_normal((LATENT_RANK, dim), dtype=np.float32) / np.sqrt(LATENT_RANK)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        if self.kind == "gaussian":
            return rng.standard_normal((count, self.dim), dtype=np.float32)
        latent = rng.standard_normal((count, LATENT_RANK), dtype=np.float32) @ self._basis
        drawn: np.ndarray = latent + LATENT_NOISE * rng.standard_normal((count, self.dim), dtype=np.float32)
        return drawn


@dataclass
class Dataset:
    """N items (text, theme, vector, owner) and the queries (text, vector, asking user) of one run."""

    n: int
    layout: str
    users: list[str]
    texts: list[str]
    themes: np.ndarray
    vectors: np.ndarray  # (n, dim) float32
    owner: np.ndarray  # index into users, per item
    queries: list[str]
    query_vectors: np.ndarray
    query_owner: np.ndarray

    @classmethod
    def create(cls, corpus: Corpus, n: int, layout: str, user_count: int, vectors: Vectors, queries: int,
               seed: int) -> "Dataset":
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}")
        text_rng, vec_rng, query_rng = (np.random.default_rng([seed, n, i]) for i in (1, 2, 3))
        user_rng = np.random.default_rng([seed, n, 4])
        users = [USER] if layout == "one" else [f"user-{i:05d}" for i in range(user_count)]
        if layout == "skewed":
            weights = 1.0 / np.arange(1, len(users) + 1)
            owner = user_rng.choice(len(users), size=n, p=weights / weights.sum())
            query_owner = owner[user_rng.integers(n, size=queries)]
        else:
            owner = user_rng.integers(len(users), size=n)
            query_owner = user_rng.integers(len(users), size=queries)
        return cls(n=n, layout=layout, users=users, texts=corpus.texts(text_rng, n),
                   themes=text_rng.integers(len(THEMES), size=n), vectors=vectors.draw(vec_rng, n),
                   owner=owner, queries=corpus.queries(query_rng, queries),
                   query_vectors=vectors.draw(query_rng, queries), query_owner=query_owner)

    def batches(self, size: int) -> Iterator[list[dict[str, Any]]]:
        """``add_many`` batches of item dicts, in order."""
        for start in range(0, self.n, size):
            stop = min(start + size, self.n)
            yield [{"user_id": self.users[self.owner[i]], "content": self.texts[i], "theme": THEMES[self.themes[i]],
                    "embedding": self.vectors[i]} for i in range(start, stop)]

    def query_user(self, index: int) -> str:
        return self.users[int(self.query_owner[index])]

    def exact_top(self, ids: np.ndarray, indexes: range | list[int], k: int = 10) -> list[set[int]]:
        """Ids of the ``k`` nearest items by cosine among the asking user's items (brute force)."""
        norms = np.linalg.norm(self.vectors, axis=1)
        by_user = {u: np.flatnonzero(self.owner == u) for u in {int(self.query_owner[i]) for i in indexes}}
        out = []
        for i in indexes:
            rows = by_user[int(self.query_owner[i])]
            q = self.query_vectors[i]
            scores = (self.vectors[rows] @ q) / (norms[rows] * float(np.linalg.norm(q)))
            best = rows[np.argsort(-scores)[:k]]
            out.append({int(x) for x in ids[best]})
        return out
