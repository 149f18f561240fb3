"""What the reranking stage costs under other read policies, on LoCoMo dev: the quality / p50 frontier.

Reads the model scores ``locomo_rerank_loo.py --scores FILE`` keeps (each dev question's top 50,
first-stage keys and the model's 50 scores; collected here if the file is absent). A policy:

* ``head H``: the first stage's best H keep their places, unread;
* ``first F, enough E``: the model reads the next F, and the rest of its depth (16, 20, 30) only
  when none of those scored E (``retrieval.stage.reads_on``; the shipped ``onnx:`` stage is head 0, first 8, enough 2);
* ``weight W``: the model's share of the blend (``retrieval.stage.blend``);
* ``gate lead K >= G``: the model reads nothing when the first stage's best key leads its
  (K+1)th by G or more (the first stage is sure); otherwise the shipped two steps (head 0,
  first 8, enough 2, depth 20).

A search's added time is estimated, not timed, so the grid costs no model runs: each pair costs
``fixed + per_token x tokens`` on one core (the two constants fitted here by timing single pairs of
the data, as the stage runs them), the pairs of a step spread longest first over ``--cores``
workers, plus ``--step-ms`` per step. The estimate is checked against what
``locomo_rerank_cost.py`` measured (docs/benchmarks.md). Settings are chosen leave one
conversation out (the bench's objective), among those whose estimated p50 on the three training
conversations is within ``--budget`` ms; the held-out p50 and mean cost are reported with it.

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_rerank_policies.py \\
        --data ../shared/data/locomo/locomo_dev.json --reranker onnx:<folder> --scores SCORES.json [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import questions, score, turn_items
from navi_memory.bench.locomo_loo import _line, objective, pooled
from navi_memory.onnx_reranker import OnnxCrossEncoder
from navi_memory.reranking import ONNX
from navi_memory.retrieval.stage import blend, reorder

from locomo_rerank_loo import collect

DEPTHS = (16, 20, 30)
HEADS = (0, 1, 2)
FIRSTS = (4, 5, 6, 8)
ENOUGHS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
WEIGHTS = (0.4, 0.5, 0.6)
BUDGETS = (1e9, 60.0, 40.0, 35.0)
GATE_LEADS = (1, 4)  # the best key's lead over the 2nd / the 5th
GATES = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6)


def pair_costs(model: OnnxCrossEncoder, pairs: Sequence[tuple[str, str]]) -> tuple[float, float, int]:
    """(fixed ms, ms per token) fitted over single runs of ``pairs`` (best of three each; ``model``
    keeps no scores, so each run is timed), and how many."""
    tokens, times = [], []
    for pair in pairs:
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            model.predict([pair])
            runs.append((time.perf_counter() - start) * 1000)
        tokens.append(len(model._load()[1].encode(*pair).ids))
        times.append(min(runs))
    slope, intercept = np.polyfit(np.array(tokens, dtype=float), np.array(times), 1)
    return float(intercept), float(slope), len(pairs)


def makespan(costs: Sequence[float], cores: int) -> float:
    """Longest first onto the least loaded worker (what the stage's thread pool does)."""
    load = [0.0] * cores
    for cost in sorted(costs, reverse=True):
        load[load.index(min(load))] += cost
    return max(load)


def lead(row: dict[str, Any], k: int) -> float:
    """How far the first stage's best key is ahead of its (k+1)th: how sure that stage is."""
    keys = row["first"]
    return keys[0] - keys[min(k, len(keys) - 1)] if keys else 0.0


def apply(row: dict[str, Any], costs: list[float], depth: int, head: int, first: int | None, enough: float | None,
          weight: float, cores: int, step_ms: float,
          gate: tuple[int, float] | None = None) -> tuple[list[str], float, int]:
    """The ranked dia_ids, the estimated added ms and the pairs read under one policy."""
    if gate is not None and lead(row, gate[0]) >= gate[1]:
        return list(row["dia"]), 0.0, 0
    size = min(depth, len(row["dia"]))
    steps = [size] if first is None else [min(head + first, size), size]
    read, spent = head, 0.0
    for n, end in enumerate(steps):
        if end > read:
            spent += makespan(costs[read:end], cores) + step_ms
            read = end
        if n == 0 and first is not None and enough is not None and any(s >= enough for s in row["model"][head:read]):
            break
    mixed = dict(zip(range(head, read), blend(row["first"][head:read], row["model"][head:read], weight)))
    order = list(range(head)) + reorder(range(head, len(row["dia"])), mixed)
    return [row["dia"][i] for i in order], spent, read - head


def p50(values: Sequence[float]) -> float:
    return sorted(values)[len(values) // 2]


def _budget(budget: str) -> str:
    return "no budget" if float(budget) >= 1e9 else f"p50 within {budget} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--reranker", required=True, metavar="onnx:FOLDER")
    parser.add_argument("--scores", required=True, type=Path, help="locomo_rerank_loo.py's --scores file")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--step-ms", type=float, default=1.0)
    parser.add_argument("--timed-pairs", type=int, default=120)
    parser.add_argument("--pair-cost", default=None, metavar="FIXED,PER_TOKEN",
                        help="ms a pair and ms a token instead of timing pairs (a busy machine's fit is too high)")
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    parser.add_argument("--json", dest="json_out", type=Path, default=None)
    args = parser.parse_args()
    assert args.reranker.startswith(ONNX), "the cost fit times an onnx:<folder> model"
    if args.scores.is_file():
        collected = json.loads(args.scores.read_text(encoding="utf-8"))
    else:
        collected = collect(args.data, args.reranker, args.cache)
        args.scores.write_text(json.dumps(collected), encoding="utf-8")
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    text = {(s["sample_id"], it["metadata"]["dia_id"]): it["content"] for s in samples for it in turn_items(s)}
    asked = [(s["sample_id"], q["question"]) for s in samples for q in questions(s)]
    assert [u for u, _ in asked] == [r["user"] for r in collected], "the scores file is of other data"
    model = OnnxCrossEncoder(args.reranker[len(ONNX):], threads=1, cache_size=0)
    tokenizer = model._load()[1]
    pairs = [[(q, text[(u, d)]) for d in r["dia"][:max(DEPTHS)]] for (u, q), r in zip(asked, collected)]
    if args.pair_cost:
        fixed, per_token = (float(x) for x in args.pair_cost.split(","))
        timed = 0
    else:
        sample = random.Random(7).sample([p for ps in pairs for p in ps[:8]], args.timed_pairs)
        fixed, per_token, timed = pair_costs(model, sample)
    print(f"one pair on one core: {fixed:.2f} ms + {per_token:.3f} ms a token ({timed} pairs timed)")
    costs = [[fixed + per_token * len(tokenizer.encode(*p).ids) for p in ps] for ps in pairs]
    users = sorted({r["user"] for r in collected})
    Setting = tuple[str, int, int, int | None, float | None, float, tuple[int, float] | None]
    settings: list[Setting] = [
        (f"all {d}, head {h}, weight {w:g}", d, h, None, None, w, None) for d in DEPTHS for h in HEADS for w in WEIGHTS]
    settings += [(f"head {h}, first {f}, enough {e:g}, weight {w:g}" + ("" if d == max(DEPTHS) else f", depth {d}"),
                  d, h, f, e, w, None)
                 for d in DEPTHS for h in HEADS for f in FIRSTS for e in ENOUGHS for w in WEIGHTS]
    settings += [(f"gate lead {k} >= {g:g}, weight {w:g}", 20, 0, 8, 2.0, w, (k, g))
                 for k in GATE_LEADS for g in GATES for w in WEIGHTS]
    table: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name, depth, head, first, enough, weight, gate in settings:
        table[name] = {u: [] for u in users}
        for row, cost in zip(collected, costs):
            ranked, spent, read = apply(row, cost, depth, head, first, enough, weight, args.cores, args.step_ms, gate)
            table[name][row["user"]].append({"category": row["category"], "score": score(ranked[:20], row["evidence"]),
                                             "ms": spent, "reads": read})

    def costs_of(rows: list[dict[str, Any]], by_user: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
        ms = [r["ms"] for r in rows]
        out: dict[str, Any] = {"p50_ms": round(p50(ms), 1), "p95_ms": round(sorted(ms)[int(0.95 * len(ms))], 1),
                               "mean_ms": round(statistics.mean(ms), 1),
                               "reads_mean": round(statistics.mean(r["reads"] for r in rows), 1)}
        if by_user:
            out["p50_ms_by_conversation"] = {u: round(p50([r["ms"] for r in v]), 1) for u, v in by_user.items()}
        return out

    report: dict[str, Any] = {"reranker": args.reranker, "pair_cost": {"fixed_ms": fixed, "per_token_ms": per_token,
                                                                      "timed_pairs": timed},
                              "cores": args.cores, "settings": {}, "leave_one_out": {}}
    for name, by_user in table.items():
        every = [r for u in users for r in by_user[u]]
        report["settings"][name] = {**pooled(every), **costs_of(every, by_user)}
    def held_out(names: list[str], budget: float) -> dict[str, Any] | None:
        """Each conversation scored with the setting of ``names`` best on the other three among
        those whose p50 there fits ``budget``; None when none fits."""
        held: dict[str, list[dict[str, Any]]] = {}
        folds = []
        for user in users:
            train = [u for u in users if u != user]
            fits = [n for n in names if p50([r["ms"] for u in train for r in table[n][u]]) <= budget]
            if not fits:
                return None
            chosen = max(fits, key=lambda n: objective([r for u in train for r in table[n][u]]))
            folds.append({"held_out": user, "chosen": chosen})
            held[user] = table[chosen][user]
        every = [r for u in users for r in held[u]]
        return {**pooled(every), **costs_of(every, held), "folds": folds}

    report["leave_one_out_gate"] = {}
    for budget in BUDGETS:
        for key, names in (("leave_one_out", list(table)),
                           ("leave_one_out_gate", [n for n in table if n.startswith("gate ")])):
            part = held_out(names, budget)
            if part is not None:
                report[key][f"{budget:g}"] = part
    families = {f"first 8, depth {d}": [n for n in table if n.startswith("head 0, first 8,")
                                        and n.endswith("" if d == max(DEPTHS) else f", depth {d}")
                                        and (d != max(DEPTHS) or ", depth" not in n)] for d in DEPTHS}
    families["first 8, any depth"] = [n for names in list(families.values()) for n in names]
    report["leave_one_out_first_8"] = {family: held_out(names, 1e9) for family, names in families.items()}
    print(f"  {'all dev':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4"
          "   est. p50 / p95 / mean ms, p50 by conversation")
    shown = ["all 30, head 0, weight 0.5", "head 0, first 8, enough 2, weight 0.5",
             "head 0, first 8, enough 2, weight 0.5, depth 20", "head 0, first 8, enough 2, weight 0.5, depth 16",
             "head 0, first 6, enough 2, weight 0.5", "head 0, first 4, enough 2, weight 0.5",
             "head 1, first 4, enough 1, weight 0.5", "head 1, first 8, enough 3, weight 0.5",
             "gate lead 1 >= 0.15, weight 0.5", "gate lead 1 >= 0.3, weight 0.5", "gate lead 4 >= 0.4, weight 0.5"]
    for name in shown:
        part = report["settings"][name]
        print(f"{_line(name, part)}   {part['p50_ms']:.0f} / {part['p95_ms']:.0f} / {part['mean_ms']:.0f}",
              " ".join(f"{v:.0f}" for v in part["p50_ms_by_conversation"].values()))
    loo = [(f"leave one out, {_budget(b)}", part) for b, part in report["leave_one_out"].items()]
    loo += [(f"gate only, leave one out, {_budget(b)}", part) for b, part in report["leave_one_out_gate"].items()]
    for label, part in loo:
        print(f"{_line(label, part)}   {part['p50_ms']:.0f} / {part['p95_ms']:.0f} / {part['mean_ms']:.0f}",
              " ".join(f"{v:.0f}" for v in part["p50_ms_by_conversation"].values()))
        for fold in part["folds"]:
            print(f"      {fold['held_out']}: {fold['chosen']}")
    for family, part in report["leave_one_out_first_8"].items():
        print(f"{_line(f'leave one out over {family} (enough x weight)', part)}   {part['p50_ms']:.0f} /"
              f" {part['p95_ms']:.0f} / {part['mean_ms']:.0f}")
    if args.json_out:  # the settings shown or chosen by a fold (the grid is re-made from the scores in seconds)
        chosen = {f["chosen"] for key in ("leave_one_out", "leave_one_out_gate", "leave_one_out_first_8")
                  for part in report[key].values() for f in part["folds"]}
        report["settings"] = {n: v for n, v in report["settings"].items() if n in set(shown) | chosen}
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
