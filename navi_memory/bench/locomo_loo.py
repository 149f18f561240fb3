"""Search knobs chosen leave one conversation out (``navi-memory bench locomo --loo``).

Every setting of a small grid of ``store.search`` knobs is asked every question once. For each
conversation held out, the setting with the best mean of R@5 and R@10 on the other conversations
is chosen and scored on the held-out one; the held-out questions of all folds, pooled, give the
leave-one-out figures, printed beside the all-dev figures of the product's defaults and of the
setting that is best on all conversations at once (the optimistic, tuned-on-test figure).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any, Mapping, Sequence

from ..progress import Progress
from ..retrieval import context
from ..store import MemoryStore
from .locomo_data import CATEGORIES, KS, questions, score, summarise

GRID: dict[str, tuple[float, ...]] = {"semantic_weight": (0.4, 0.5, 0.6, 0.7),
                                      "context_weight": (0.0, 0.1, 0.2, 0.3, 0.4)}


def settings(grid: Mapping[str, Sequence[float]] = GRID) -> list[dict[str, float]]:
    names = list(grid)
    return [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]


def label(setting: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {value:g}" for name, value in setting.items())


def objective(rows: Sequence[dict[str, Any]]) -> float:
    """What a fold maximises: the mean of R@5 and R@10 over its questions."""
    return sum(r["score"]["recall@5"] + r["score"]["recall@10"] for r in rows) / (2 * len(rows)) if rows else 0.0


def choose(rows: Mapping[str, Mapping[str, list[dict[str, Any]]]], users: Sequence[str]) -> str:
    """The setting (label) with the best objective over ``users``' questions; the first on ties."""
    best, best_value = "", -1.0
    for name, by_user in rows.items():
        value = objective([r for u in users for r in by_user[u]])
        if value > best_value + 1e-12:
            best, best_value = name, value
    return best


def pooled(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    report = summarise([r["score"] for r in rows])
    report["per_category"] = {str(c): summarise([r["score"] for r in rows if r["category"] == c])
                              for c in CATEGORIES if any(r["category"] == c for r in rows)}
    return report


def leave_one_out(rows: Mapping[str, Mapping[str, list[dict[str, Any]]]], users: Sequence[str]) -> dict[str, Any]:
    folds, held = [], []
    for user in users:
        chosen = choose(rows, [u for u in users if u != user])
        folds.append({"held_out": user, "chosen": chosen, **pooled(rows[chosen][user])})
        held.extend(rows[chosen][user])
    return {"folds": folds, **pooled(held)}


def measure(store: MemoryStore, samples: list[dict[str, Any]],
            grid: Mapping[str, Sequence[float]] = GRID, default: Mapping[str, float] | None = None) -> dict[str, Any]:
    grid_settings = settings(grid)
    users = [s["sample_id"] for s in samples]
    asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
    embedder = store.embedder
    vectors = [embedder.embed_query(q["question"]) if embedder is not None else None for _, q in asked]
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    progress = Progress("loo grid", len(grid_settings) * len(asked))
    for n, setting in enumerate(grid_settings):
        by_user: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for i, ((user, q), vector) in enumerate(zip(asked, vectors)):
            found = store.search(q["question"], user_id=user, limit=max(KS), query_embedding=vector, **setting)
            by_user[user].append({"category": q["category"],
                                  "score": score([r.metadata.get("dia_id") for r in found], q["evidence"])})
            progress(n * len(asked) + i + 1)
        rows[label(setting)] = {u: by_user[u] for u in users}
    progress.close()
    base = label(default or {"semantic_weight": store.settings.semantic_weight, "context_weight": context.NEIGHBOUR_WEIGHT})
    best = choose(rows, users)
    out = {"grid": {k: list(v) for k, v in grid.items()}, "objective": "mean of R@5 and R@10",
           "leave_one_out": leave_one_out(rows, users)}
    if base in rows:
        out["default"] = {"setting": base, **pooled([r for u in users for r in rows[base][u]])}
    out["best_on_all"] = {"setting": best, **pooled([r for u in users for r in rows[best][u]])}
    out["settings"] = {name: round(objective([r for u in users for r in by_user[u]]), 4)
                       for name, by_user in rows.items()}
    return out


def _line(name: str, part: Mapping[str, Any]) -> str:
    cats = " ".join(f"{part['per_category'][c]['recall']['5']:.3f}/{part['per_category'][c]['recall']['10']:.3f}"
                    if c in part["per_category"] else "  -  " for c in map(str, CATEGORIES))
    r = part["recall"]
    return f"  {name:<56} {r['5']:>6.3f} {r['10']:>6.3f} {part['ndcg10']:>8.3f}   {cats}"


def format_report(report: Mapping[str, Any]) -> str:
    lines = [f"leave one conversation out over {label({k: 0 for k in report['grid']}).replace(' 0', '')}"
             f" ({report['objective']})",
             f"  {'':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4"]
    if "default" in report:
        lines.append(_line(f"all dev, default ({report['default']['setting']})", report["default"]))
    lines.append(_line(f"all dev, best ({report['best_on_all']['setting']})", report["best_on_all"]))
    lines.append(_line("leave-one-out (held-out pooled)", report["leave_one_out"]))
    for fold in report["leave_one_out"]["folds"]:
        lines.append(_line(f"  {fold['held_out']}: {fold['chosen']}", fold))
    return "\n".join(lines)
