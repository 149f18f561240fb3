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
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

from ..core.validation import MAX_LIMIT
from ..progress import Progress
from ..retrieval import context, rerank
from ..retrieval.superseded import order_key
from ..store import MemoryStore
from .locomo_data import CATEGORIES, KS, questions, score, summarise

# search() arguments, and (upper case) constants of retrieval.rerank or retrieval.context
GRID: dict[str, tuple[float, ...]] = {"semantic_weight": (0.4, 0.5, 0.6), "context_weight": (0.2, 0.3, 0.4, 0.5),
                                      "PERSON_FOCUS": (0.0, 0.5, 0.7, 1.0),
                                      "WHEN_BOOST": (0.0, 0.1, 0.2, 0.3, 0.4), "DATE_BOOST": (0.0, 0.25, 0.5, 0.75, 1.0)}


def _module(constant: str) -> Any:
    return context if hasattr(context, constant) else rerank


@contextmanager
def applied(setting: Mapping[str, float]) -> Iterator[dict[str, Any]]:
    """The setting's rerank constants set for the block; yields its search() arguments."""
    constants = {name: value for name, value in setting.items() if name.isupper()}
    saved = {name: getattr(_module(name), name) for name in constants}
    for name, value in constants.items():
        setattr(_module(name), name, value)
    try:
        yield {name: value for name, value in setting.items() if not name.isupper()}
    finally:
        for name, value in saved.items():
            setattr(_module(name), name, value)


def current(store: MemoryStore, grid: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """The product's own values of the grid's knobs."""
    values = {"semantic_weight": store.settings.semantic_weight, "context_weight": context.NEIGHBOUR_WEIGHT}
    return {name: values[name] if name in values else getattr(_module(name), name) for name in grid}


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


# Additive boosts of retrieval.rerank (constant: the key of its adjustment in SearchResult.scores):
# their settings are re-scored from the candidates of two searches (boosts at their largest, and
# off), so the grid searches once per setting of the other knobs.
BOOSTS = {"WHEN_BOOST": "when", "DATE_BOOST": "date"}


def _candidates(found: Sequence[Any], into: dict[str, tuple[float, frozenset[str]]]) -> None:
    """Each result's rank key (what orders the page; ``score`` is its relevance since issue 32)
    without the boosts, and which boosts applied to it."""
    for r in found:
        dia = r.metadata.get("dia_id")
        if dia not in into:
            keys = frozenset(key for key in BOOSTS.values() if key in r.scores)
            into[dia] = (order_key(r) - sum(r.scores[key] for key in keys), keys)


def _ranked(cands: Mapping[str, tuple[float, frozenset[str]]], boosts: Mapping[str, float]) -> list[str]:
    by_key = {BOOSTS[name]: value for name, value in boosts.items()}
    order = {dia: i for i, dia in enumerate(cands)}
    total = {dia: base + sum(by_key.get(key, 0.0) for key in keys) for dia, (base, keys) in cands.items()}
    return sorted(cands, key=lambda dia: (-total[dia], order[dia]))[:max(KS)]


def measure(store: MemoryStore, samples: list[dict[str, Any]],
            grid: Mapping[str, Sequence[float]] = GRID, default: Mapping[str, float] | None = None) -> dict[str, Any]:
    own = dict(default or current(store, grid))
    grid = {name: tuple(sorted({*values, own[name]})) for name, values in grid.items()}  # the default is a setting
    searched = settings({name: values for name, values in grid.items() if name not in BOOSTS})
    boosted = settings({name: values for name, values in grid.items() if name in BOOSTS})
    users = [s["sample_id"] for s in samples]
    asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
    largest = {name: max(grid[name]) for name in BOOSTS if name in grid}
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    progress, done = Progress("loo grid", 2 * len(searched) * len(asked)), 0
    for setting in searched:
        cands: list[dict[str, tuple[float, frozenset[str]]]] = [{} for _ in asked]
        for boosts in (largest, {name: 0.0 for name in largest}):
            with applied({**setting, **boosts}) as arguments:
                for i, (user, q) in enumerate(asked):  # the store embeds (PERSON_FOCUS shapes the vector)
                    _candidates(store.search(q["question"], user_id=user, limit=MAX_LIMIT, min_score=0, **arguments), cands[i])
                    done += 1
                    progress(done)
        for boosts in boosted:
            by_user: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for (user, q), found in zip(asked, cands):
                by_user[user].append({"category": q["category"], "score": score(_ranked(found, boosts), q["evidence"])})
            rows[label({**setting, **boosts})] = {u: by_user[u] for u in users}
    progress.close()
    base = label({**{k: v for k, v in own.items() if k not in BOOSTS}, **{k: v for k, v in own.items() if k in BOOSTS}})
    best = choose(rows, users)
    out = {"grid": {k: list(v) for k, v in grid.items()}, "objective": "mean of R@5 and R@10",
           "leave_one_out": leave_one_out(rows, users)}
    # the boosts alone, the other knobs at the product's values
    fixed = label({k: v for k, v in own.items() if k not in BOOSTS}) + ", "
    alone = {name: part for name, part in rows.items() if name.startswith(fixed)}
    if alone and len(alone) < len(rows):
        out["leave_one_out_boosts"] = leave_one_out(alone, users)
    # the person focus and the boosts, semantic weight and smoothing at the product's values
    knobs = label({k: v for k, v in own.items() if k in ("semantic_weight", "context_weight")}) + ", "
    scored = {name: part for name, part in rows.items() if name.startswith(knobs)}
    if "PERSON_FOCUS" in grid and scored and len(alone) < len(scored) < len(rows):
        out["leave_one_out_focus"] = leave_one_out(scored, users)
    if base in rows:
        out["default"] = {"setting": base, **pooled([r for u in users for r in rows[base][u]])}
    out["best_on_all"] = {"setting": best, **pooled([r for u in users for r in rows[best][u]])}
    out["settings"] = {name: _brief([r for u in users for r in by_user[u]]) for name, by_user in rows.items()}
    return out


def _brief(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Objective, R@5 and R@10 overall and per category (for the ablations of docs/benchmarks-history.md)."""
    part = pooled(rows)
    return {"objective": round(objective(rows), 4), "recall": {k: part["recall"][k] for k in ("5", "10")},
            "per_category": {c: {k: p["recall"][k] for k in ("5", "10")} for c, p in part["per_category"].items()}}


def _line(name: str, part: Mapping[str, Any]) -> str:
    cats = " ".join(f"{part['per_category'][c]['recall']['5']:.3f}/{part['per_category'][c]['recall']['10']:.3f}"
                    if c in part["per_category"] else "  -  " for c in map(str, CATEGORIES))
    r = part["recall"]
    return f"  {name:<56} {r['5']:>6.3f} {r['10']:>6.3f} {part['ndcg10']:>8.3f}   {cats}"


def folds_lines(name: str, loo: Mapping[str, Any]) -> list[str]:
    """A leave-one-out result's line, then one per fold (its held-out conversation and choice)."""
    return [_line(name, loo), *(_line(f"  {fold['held_out']}: {fold['chosen']}", fold) for fold in loo["folds"])]


def format_report(report: Mapping[str, Any]) -> str:
    lines = [f"leave one conversation out over {label({k: 0 for k in report['grid']}).replace(' 0', '')}"
             f" ({report['objective']})",
             f"  {'':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4"]
    if "default" in report:
        lines.append(_line(f"all dev, default ({report['default']['setting']})", report["default"]))
    lines.append(_line(f"all dev, best ({report['best_on_all']['setting']})", report["best_on_all"]))
    for key, name in (("leave_one_out", "leave-one-out (held-out pooled)"),
                      ("leave_one_out_focus", "leave-one-out, person focus + boosts (others at default)"),
                      ("leave_one_out_boosts", "leave-one-out, boosts only (other knobs at default)")):
        if key in report:
            lines.extend(folds_lines(name, report[key]))
    return "\n".join(lines)
