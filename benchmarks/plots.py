"""Figures and Markdown tables of docs/benchmarks.md, drawn from the benchmarks' JSON reports.

    python benchmarks/plots.py locomo REPORT.json --out docs/img/locomo-recall.png
    python benchmarks/plots.py latency SQLITE.json [POSTGRES.json ...] --out docs/img/latency-vs-n.png

``locomo``: recall@k (k = 1, 5, 10, 20) of navi-memory and of every peer in one
``navi-memory bench locomo --peers ... --json`` report. ``latency``: search p50 (solid) and p95
(dashed) against N for navi-memory's backend and every peer of each
``navi-memory bench latency --peers ... --json`` report, one panel per report (a panel's curves
were measured in the same run, on the same data and queries). Each command also prints the
figures as Markdown tables, so the text and the picture come from the same numbers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

KS = ("1", "5", "10", "20")
NAMES = {"navi-memory": "navi-memory", "bm25": "BM25 (bm25s)", "dense": "dense only (cosine)",
         "langchain": "langchain-postgres hybrid", "engram": "engram-search (MiniLM)", "langgraph": "LangGraph InMemoryStore (index)",
         "sqlite": "navi-memory, SQLite", "postgresql": "navi-memory, PostgreSQL"}
COLOURS = {"navi-memory": "C0", "sqlite": "C0", "postgresql": "C3", "bm25": "C1", "dense": "C2",
           "langchain": "C4", "langgraph": "C5", "engram": "C6"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def locomo(report_path: Path, out: Path) -> None:
    report = json.loads(report_path.read_text(encoding="utf-8"))
    methods = [("navi-memory", report), *report.get("peers", {}).items()]
    print("| method | R@1 | R@5 | R@10 | R@20 | NDCG@10 | p50 ms | p95 ms |\n|---|--:|--:|--:|--:|--:|--:|--:|")
    for name, part in methods:
        r, lat = part["recall"], part["latency_ms"]
        print(f"| {NAMES[name]} | " + " | ".join(f"{r[k]:.3f}" for k in KS)
              + f" | {part['ndcg10']:.3f} | {lat['p50']:.2f} | {lat['p95']:.2f} |")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ks = [int(k) for k in KS]
    for name, part in methods:
        values = [part["recall"][k] for k in KS]
        ax.plot(ks, values, marker="o", color=COLOURS[name], linewidth=2.2 if name == "navi-memory" else 1.5,
                label=f"{NAMES[name]}: R@5 {values[1]:.3f}, R@10 {values[2]:.3f}")
    ax.set_xticks(ks)
    ax.set_xlabel("k")
    ax.set_ylabel("recall@k")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title(f"LoCoMo dev split, {report['questions']} questions, embeddings {report.get('embedding_model')}",
                 fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def _series(report: dict[str, Any]) -> dict[tuple[str, str], list[tuple[int, dict[str, float]]]]:
    """{(curve, layout): [(N, search_ms)]} for the run's backend, its SQLite comparison and its peers."""
    curves: dict[tuple[str, str], list[tuple[int, dict[str, float]]]] = {}
    for r in report["results"]:
        curves.setdefault((r["backend"], r["layout"]), []).append((r["n"], r["search_ms"]))
        if "sqlite" in r:
            curves.setdefault(("sqlite", r["layout"]), []).append((r["n"], r["sqlite"]["search_ms"]))
        for name, peer in r.get("peers", {}).items():
            if "search_ms" in peer:
                curves.setdefault((name, r["layout"]), []).append((r["n"], peer["search_ms"]))
    return curves


def latency(paths: list[Path], out: Path) -> None:
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    print("| run | N | layout | backend | ingest (items/s) | search p50 / p95 (ms) | peer / navi-memory hybrid"
          " p50 / p95 | peer / navi-memory lexical p50 / p95 | load |\n|---|--:|---|---|--:|--:|--:|--:|--:|")
    for run, report in enumerate(reports, start=1):
        for r in report["results"]:
            rows = [(r["backend"], r)] + ([("sqlite", r["sqlite"])] if "sqlite" in r else [])
            rows += list(r.get("peers", {}).items())
            for position, (name, row) in enumerate(rows):
                if "search_ms" not in row:
                    print(f"| {run} | {r['n']:,} | {r['layout']} | {NAMES[name]} | skipped | | | | |")
                    continue
                s = row["search_ms"]
                ingest = row.get("ingest_items_per_s", row.get("api_ingest_items_per_s"))
                vs = " | ".join(f"{s['p50'] / r[ours]['p50']:.2f} / {s['p95'] / r[ours]['p95']:.2f}"
                                for ours in ("search_ms", "lexical_search_ms")) if position else "– | –"
                print(f"| {run} | {r['n']:,} | {r['layout']} | {NAMES[name]} | {ingest:,.0f} | {s['p50']:.2f} /"
                      f" {s['p95']:.2f} | {vs} | {s['load']:.2f} |")
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(reports), figsize=(6.2 * len(reports), 4.6), sharey=True, squeeze=False)
    for ax, report in zip(axes[0], reports):
        curves = _series(report)
        layouts = sorted({layout for _, layout in curves})
        for (name, layout), points in curves.items():
            label = NAMES[name] + (f" ({layout})" if len(layouts) > 1 else "")
            style = ":" if len(layouts) > 1 and layout != layouts[0] else "-"
            ns = [n for n, _ in points]
            ax.plot(ns, [s["p50"] for _, s in points], marker="o", linestyle=style, color=COLOURS[name],
                    label=f"{label} p50")
            ax.plot(ns, [s["p95"] for _, s in points], marker=".", linestyle="--", color=COLOURS[name], alpha=0.6,
                    label=f"{label} p95")
        loads = [s["load"] for curve in curves.values() for _, s in curve]
        ax.set_title(f"run on {report['results'][0]['backend']}, layout {', '.join(layouts)},"
                     f" {report['vectors']} vectors, {report['date'][:16].replace('T', ' ')} UTC\n"
                     f"1-min load during the searches {min(loads):.1f}–{max(loads):.1f} (2 cores)", fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N (items in the database)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("search latency (ms)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="figure", required=True)
    p = sub.add_parser("locomo", help="recall@k curves from one bench locomo report")
    p.add_argument("report", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("latency", help="latency vs N from bench latency reports, one panel each")
    p.add_argument("reports", type=Path, nargs="+")
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.figure == "locomo":
        locomo(args.report, args.out)
    else:
        latency(args.reports, args.out)


if __name__ == "__main__":
    main()
