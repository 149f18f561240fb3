"""A second hop through shared words or entities (issue 36, item 1), measured leave one conversation out.

Every LoCoMo dev question is searched once with the default search (top 50, each result's rank
key); then each setting re-orders that list: a candidate sharing a *link term* with one of the
``seeds`` best results gains ``weight x`` that result's rank key, and the ``head`` best results
keep their places. A link term is a word of the seed that the question does not contain and no
speaker's name is, held by 2 to ``max_df`` turns (of the conversation, or of the 50 candidates);
``words``: any content word; ``entities``: rule-extracted names, numbers and quoted titles
(capitalised words not opening a sentence). Turns beyond the top 50 may be linked too (the
conversation scope reads all turns). Settings are chosen leave one conversation out
(``bench.locomo_loo.leave_one_out``: best mean of R@5 and R@10 on the other three).

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_second_hop.py \\
        --data ../shared/data/locomo/locomo_dev.json [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

from navi_memory import MemoryStore
from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import questions, score, turn_items
from navi_memory.bench.locomo_loo import _line, folds_lines, leave_one_out, pooled
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder
from navi_memory.progress import Progress
from navi_memory.retrieval.query import STOP_WORDS
from navi_memory.retrieval.superseded import order_key

TOP = 50
GRID = {"seeds": (3, 5, 10), "max_df": (3, 5, 7), "weight": (0.05, 0.1, 0.2), "head": (0, 3, 5)}
_WORD = re.compile(r"[A-Za-z][\w'\u2019-]*|\d+")
_NOT_NAMES = {"i", "i'm", "i've", "i'll", "i'd"}


def normal(word: str) -> str:
    """Lower case, without a possessive and a plural ``s`` (crude, enough to link "turtles" and "turtle")."""
    word = word.lower().replace("\u2019", "'")
    word = word[:-2] if word.endswith("'s") else word
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def words(text: str) -> set[str]:
    """The content words of a turn's text (the speaker's ``name:`` left out)."""
    return {w for w in map(normal, _WORD.findall(text)) if w not in STOP_WORDS and len(w) > 2}


def entities(text: str) -> set[str]:
    """Names, numbers and quoted titles: capitalised words that do not open a sentence, digits, ``"..."``."""
    out = set()
    for match in _WORD.finditer(text):
        word, before = match.group(0), text[:match.start()].rstrip()
        opening = not before or before[-1] in '.!?"('
        if word.isdigit() or (word[0].isupper() and not opening and word.lower() not in _NOT_NAMES):
            if (n := normal(word)) not in STOP_WORDS:
                out.add(n)
    out.update(" ".join(normal(w) for w in quoted.split()) for quoted in re.findall(r'"([^"]+)"', text))
    return out


def linked(top: Sequence[tuple[str, float]], terms: dict[str, set[str]], df: Counter[str], holders: dict[str, set[str]],
           skip: set[str], seeds: int, max_df: int, weight: float, head: int) -> list[str]:
    """``top`` (id, rank key) re-ordered: each turn holding a link term of one of the first ``seeds``
    gains ``weight x`` the best such seed's key; the first ``head`` stay first."""
    gain: dict[str, float] = defaultdict(float)
    for seed, key in top[:seeds]:
        for term in terms.get(seed, ()):
            if term in skip or not 2 <= df[term] <= max_df:
                continue
            for other in holders[term]:
                if other != seed:
                    gain[other] = max(gain[other], weight * key)
    fixed = [i for i, _ in top[:head]]
    base = dict(top)
    total = {i: base.get(i, 0.0) + gain.get(i, 0.0) for i in {*base, *gain} if i not in fixed}
    return fixed + sorted(total, key=lambda i: (-total[i], i))


def collect(data: Path, cache: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, dict[str, Any]]]]:
    """Per question its top 50 (dia_id, rank key); per conversation its turns (dia_id -> text, speaker)."""
    samples = json.loads(data.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="navi-second-hop-") as tmp:
        url = f"sqlite:///{tmp}/locomo.db"
        settings = Settings(url=url, embeddings="local")
        embedder = embed_cache.cached(resolve_embedder("local", settings), cache)
        turns: dict[str, dict[str, dict[str, Any]]] = {}
        conversations = {s["sample_id"]: turn_items(s) for s in samples}
        for user, items in conversations.items():
            turns[user] = {i["metadata"]["dia_id"]: {"text": i["content"].split(": ", 1)[-1], "speaker": i["person"]}
                           for i in items}
        with MemoryStore.open(url, embedder, settings=settings, reranker=False) as store:
            for batch in (items[at:at + 256] for items in conversations.values() for at in range(0, len(items), 256)):
                store.add_many(batch)
            asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
            out, progress = [], Progress("questions", len(asked))
            for index, (user, q) in enumerate(asked):
                found = store.search(q["question"], user_id=user, limit=TOP, min_score=0)
                out.append({"user": user, "category": q["category"], "question": q["question"],
                            "evidence": q["evidence"], "top": [(r.metadata["dia_id"], order_key(r)) for r in found]})
                progress(index + 1)
            progress.close()
    return out, turns


def _holders(terms: dict[str, set[str]], ids: Iterable[str]) -> tuple[Counter[str], dict[str, set[str]]]:
    holders: dict[str, set[str]] = defaultdict(set)
    for i in ids:
        for term in terms[i]:
            holders[term].add(i)
    return Counter({t: len(h) for t, h in holders.items()}), holders


Rows = dict[str, dict[str, list[dict[str, Any]]]]


def grid_rows(asked: list[dict[str, Any]], turns: dict[str, dict[str, dict[str, Any]]]) -> Rows:
    """``{setting label: {user: [{category, score}]}}`` for the default order and every setting."""
    rows: Rows = defaultdict(lambda: defaultdict(list))
    extract = {"words": words, "entities": entities}
    terms = {(kind, u): {i: f(t["text"]) for i, t in ts.items()}
             for kind, f in extract.items() for u, ts in turns.items()}
    whole = {key: _holders(t, t) for key, t in terms.items()}
    names = {u: {normal(t["speaker"]) for t in ts.values()} for u, ts in turns.items()}
    settings = list(itertools.product(*GRID.values()))
    for q in asked:
        u = q["user"]
        listed = [i for i, _ in q["top"]]
        rows["default"][u].append({"category": q["category"], "score": score(listed, q["evidence"])})
        skip = names[u] | {normal(w) for w in _WORD.findall(q["question"])}
        for kind in extract:
            for scope in ("conversation", "pool"):
                df, holders = whole[kind, u] if scope == "conversation" else _holders(terms[kind, u], listed)
                for seeds, max_df, weight, head in settings:
                    ranked = linked(q["top"], terms[kind, u], df, holders, skip,
                                    int(seeds), int(max_df), weight, int(head))
                    label = f"{kind}, {scope}, seeds {seeds}, max_df {max_df}, weight {weight:g}, head {head}"
                    rows[label][u].append({"category": q["category"], "score": score(ranked, q["evidence"])})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args()
    asked, turns = collect(args.data, args.cache)
    rows = grid_rows(asked, turns)
    users = list(turns)
    report: dict[str, Any] = {"grid": GRID, "default": pooled([r for u in users for r in rows["default"][u]])}
    print(f"  {'':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4")
    print(_line("default search", report["default"]))
    families = {f"{kind}, {scope}{', head 5' if head5 else ''}": (kind, scope, head5)
                for kind in ("words", "entities") for scope in ("conversation", "pool") for head5 in (False, True)}
    for name, (kind, scope, head5) in families.items():
        part = {label: by_user for label, by_user in rows.items() if label == "default" or (
            label.startswith(f"{kind}, {scope},") and (not head5 or label.endswith("head 5")))}
        loo = leave_one_out(part, users)
        report[f"leave_one_out {name}"] = loo
        print("\n".join(folds_lines(f"leave-one-out over {name}", loo)))
    if args.json_out:
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
