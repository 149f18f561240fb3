"""The latency benchmark runs end to end on tiny sizes (figures are not checked, only their shape)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from navi_memory.bench import latency
from navi_memory.bench.data import Corpus, Dataset, Vectors
from navi_memory.errors import ConfigurationError

from .local_models import cross_encoder_folder

TINY = ["--n", "400", "--queries", "6", "--warmup", "2", "--dim", "16", "--batch", "150"]


def test_dataset_layouts_and_exact_neighbours():
    data = Dataset.create(Corpus(1), 500, "spread", 7, Vectors("lowrank", 16, 1), 5, seed=1)
    assert len(data.texts) == 500 and data.vectors.shape == (500, 16) and set(data.owner) <= set(range(7))
    assert sum(len(b) for b in data.batches(120)) == 500
    ids = np.arange(1000, 1500)
    (top,) = data.exact_top(ids, [0])
    rows = np.flatnonzero(data.owner == data.query_owner[0])
    assert top <= {int(ids[r]) for r in rows} and len(top) == min(10, len(rows))
    skewed = Dataset.create(Corpus(1), 2000, "skewed", 20, Vectors("gaussian", 8, 1), 5, seed=1)
    sizes = np.bincount(skewed.owner, minlength=20)
    assert sizes[0] > 3 * sizes[10] and set(skewed.query_owner) <= set(skewed.owner)


def test_sqlite_benchmark_with_both_layouts(tmp_path):
    out = tmp_path / "new" / "r.json"  # a folder the report makes
    report = latency.main([*TINY, "--layout", "one,spread", "--users", "5", "--json", str(out)])
    assert [(r["backend"], r["layout"]) for r in report["results"]] == [("sqlite", "one"), ("sqlite", "spread")]
    assert all(r["search_ms"]["p95"] > 0 and r["ingest_items_per_s"] > 0 for r in report["results"])
    assert out.exists()
    assert "openblas_thread_timeout" in report["environment"]  # the spin of idle BLAS threads, as it applied


def test_sqlite_benchmark_reports_the_graph_and_its_recall(capsys):
    report = latency.main([*TINY, "--n", "3000", "--ann-from", "1000"])
    (row,) = report["results"]
    assert row["graph"] and row["graph_check_recall"] >= 0.98 and row["recall_at_10"] >= 0.9
    assert "graph (built" in capsys.readouterr().out
    (exact,) = latency.main([*TINY, "--n", "3000", "--ann-from", "0"])["results"]
    assert not exact.get("graph") and "graph_build_s" not in exact and exact["recall_at_10"] == 1.0


def test_peers_answer_the_same_queries_in_the_same_run():
    pytest.importorskip("bm25s")
    pytest.importorskip("langgraph")
    report = latency.main([*TINY, "--layout", "one,spread", "--users", "3", "--recall-queries", "4",
                           "--peers", "bm25,langgraph"])
    for result in report["results"]:
        assert list(result["peers"]) == ["bm25", "langgraph"]
        assert result["peers"]["langgraph"]["recall_at_10"] == 1.0  # exact search over the same vectors
        for name, peer in result["peers"].items():
            assert peer["search_ms"]["p95"] > 0 and peer["ingest_items_per_s"] > 0
            ratio = result["ratios"][name]["search"]["p50"]
            assert ratio == pytest.approx(peer["search_ms"]["p50"] / result["search_ms"]["p50"], abs=1e-3)


def test_langgraph_peer_is_skipped_above_its_limit_and_langchain_needs_postgres():
    report = latency.main([*TINY, "--peers", "langgraph", "--langgraph-max-n", "100"])
    assert "skipped" in report["results"][0]["peers"]["langgraph"]
    assert "langgraph" not in report["results"][0]["ratios"]
    with pytest.raises(ConfigurationError, match="PostgreSQL"):
        latency.main([*TINY, "--peers", "langchain"])


@pytest.mark.postgres
def test_postgres_benchmark_builds_the_index_and_measures_recall(postgres_server):
    peers = ["--peers", "langchain"] if importlib.util.find_spec("langchain_postgres") else []
    report = latency.main([*TINY, "--db", postgres_server.url, "--layout", "spread", "--users", "4",
                           "--vectors", "lowrank", "--recall-queries", "4", "--ef-search", "40,100",
                           "--hnsw", "16:64,8:32", "--maintained", "30", "--compare-sqlite", *peers])
    (result,) = report["results"]
    assert result["backend"] == "postgresql" and result["sqlite"]["backend"] == "sqlite"
    first, second = result["builds"]
    assert (first["m"], second["m"]) == (16, 8) and first["build_s"] >= 0
    assert {(s["ef_search"], s["exact_below"] > 0) for s in first["sweep"]} == {
        (40, True), (100, True), (40, False), (100, False)}
    assert all(s["recall_at_10"] >= 0.9 for s in first["sweep"] if s["exact_below"] > 0)
    assert result["maintained_ingest_items_per_s"] > 0
    assert all("Execution Time" in result["plans"][name] for name in ("lexical", "semantic"))
    if peers:
        langchain = result["peers"]["langchain"]
        assert 0 <= langchain["recall_at_10"] <= 1 and langchain["search_ms"]["p50"] > 0
        assert set(result["ratios"]["langchain"]) == {"search", "lexical_search"}


def _locomo_sample() -> dict:
    turns = [("Ann", "I adopted a puppy named Biscuit last week."), ("Bob", "Lovely! I started pottery classes."),
             ("Ann", "Biscuit chewed my running shoes."), ("Bob", "My pottery teacher lives in Lisbon.")]
    return {"sample_id": "conv-t", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": who, "dia_id": f"D1:{i + 1}", "text": text} for i, (who, text) in enumerate(turns)]},
        "qa": [{"question": "What is the name of Ann's puppy?", "answer": "Biscuit", "evidence": ["D1:1"],
                "category": 4},
               {"question": "Where does Bob's pottery teacher live?", "answer": "Lisbon", "evidence": ["D1:4"],
                "category": 4},
               {"question": "unanswerable", "answer": "", "evidence": ["D1:2"], "category": 5}]}


def _locomo(tmp_path, *extra: str) -> dict:
    import argparse
    import json

    from navi_memory.bench import locomo

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_locomo_sample()]), encoding="utf-8")
    parser = argparse.ArgumentParser()
    locomo.add_arguments(parser)
    return locomo.run(parser.parse_args(["--data", str(data), "--embeddings", "hashing", *extra]))


def test_locomo_peers_rank_the_same_turns_and_questions(tmp_path):
    pytest.importorskip("bm25s")
    report = _locomo(tmp_path, "--peers", "bm25,dense", "--json", str(tmp_path / "out.json"))
    assert report["questions"] == 2 and list(report["peers"]) == ["bm25", "dense"]
    for peer in report["peers"].values():
        assert peer["questions"] == 2 and set(peer["recall"]) == {"1", "5", "10", "20"}
    assert report["peers"]["bm25"]["recall"]["1"] == 1.0  # both questions share rare words with their turn
    assert report["peers"]["dense"]["recall"]["20"] == 1.0  # all four turns come back
    with pytest.raises(ConfigurationError, match="PostgreSQL"):
        _locomo(tmp_path, "--peers", "langchain")
    for part in (report, *report["peers"].values()):  # the measures peers publish, for every system
        assert set(part["session_hit"]) == set(part["session_recall"]) == {"5", "10"}
        assert part["budget"]["recall"] == part["recall"]["20"] and part["budget_tokens"] == 1000
        assert set(part["per_category"]["4"]["budget"]) == {"recall", "turns", "short"}
    assert report["session_hit"]["5"] == 1.0  # one session: any turn comes from it
    # the four turns (about 10 tokens each) do not all fit in 25 tokens
    tight = _locomo(tmp_path, "--peers", "dense", "--budget", "25")
    assert tight["budget_tokens"] == 25 and tight["budget"]["turns"] < 4 and tight["peers"]["dense"]["budget"]["turns"] < 4


def test_locomo_engram_peer_runs_on_the_same_vectors_or_names_its_missing_package(tmp_path, monkeypatch):
    from navi_memory.bench import locomo_peers

    if importlib.util.find_spec("engram") is not None:
        report = _locomo(tmp_path, "--peers", "engram")
        engram = report["peers"]["engram"]
        assert engram["questions"] == 2 and engram["backend"].startswith("engram-search ")
        assert engram["recall"]["20"] == 1.0 and engram["reranker"] is None
    monkeypatch.setitem(locomo_peers.PACKAGES, "engram", "engram-search-not-installed")
    with pytest.raises(ConfigurationError, match="engram peer needs the package engram-search-not-installed"):
        _locomo(tmp_path, "--peers", "engram")


def test_locomo_reranker_option_reaches_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("NAVI_MEMORY_RERANKER", "bogus")  # the bench decides, not the environment
    assert _locomo(tmp_path, "--reranker", "none")["reranker"] is None
    assert _locomo(tmp_path)["reranker"] is None
    model = cross_encoder_folder()
    engram = ("--peers", "engram") if importlib.util.find_spec("engram") else ()
    report = _locomo(tmp_path, "--reranker", f"onnx:{model}", "--rerank-depth", "3", "--rerank-weight", "0.7", *engram)
    assert report["reranker"] == {"name": f"onnx:{model}", "depth": 3, "weight": 0.7, "first": 8, "enough": 2.0}
    assert report["questions"] == 2 and report["recall"]["20"] == 1.0
    if engram:  # engram's cross-encoder stage is the same model
        used = report["peers"]["engram"]["reranker"]
        assert {k: used[k] for k in ("name", "depth", "weight")} == {"name": f"onnx:{model}", "depth": 20, "weight": 1.0}
        assert report["peers"]["engram"]["recall"]["20"] == 1.0
    report = _locomo(tmp_path, "--reranker", f"onnx:{model}", "--rerank-all")
    assert report["reranker"] == {"name": f"onnx:{model}", "depth": 30, "weight": 0.5}
    with pytest.raises(ConfigurationError, match="unknown reranker"):
        _locomo(tmp_path, "--reranker", "bogus")


@pytest.mark.postgres
def test_locomo_langchain_peer(tmp_path, postgres_server):
    pytest.importorskip("langchain_postgres")
    report = _locomo(tmp_path, "--peers", "langchain", "--postgres", postgres_server.url)
    langchain = report["peers"]["langchain"]
    assert langchain["questions"] == 2 and langchain["recall"]["20"] == 1.0
    assert langchain["backend"].startswith("langchain-postgres")


def test_plots_draw_both_figures_from_the_reports(tmp_path):
    pytest.importorskip("matplotlib")
    import importlib.util as util
    from pathlib import Path

    spec = util.spec_from_file_location("bench_plots", Path(__file__).parent.parent / "benchmarks" / "plots.py")
    plots = util.module_from_spec(spec)
    spec.loader.exec_module(plots)
    latency.main([*TINY, "--n", "300,600", "--peers", "bm25", "--json", str(tmp_path / "lat.json")])
    _locomo(tmp_path, "--peers", "bm25", "--json", str(tmp_path / "loc.json"))
    plots.latency([tmp_path / "lat.json"], tmp_path / "lat.png")
    plots.locomo(tmp_path / "loc.json", tmp_path / "loc.png")
    assert all((tmp_path / name).read_bytes()[:4] == b"\x89PNG" for name in ("lat.png", "loc.png"))


def _two_conversations(tmp_path):
    """The LoCoMo bench's parser and a data file of two identical conversations (conv-t, conv-u)."""
    import argparse
    import json

    from navi_memory.bench import locomo

    first = _locomo_sample()
    second = {**json.loads(json.dumps(first)), "sample_id": "conv-u"}
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([first, second]), encoding="utf-8")
    parser = argparse.ArgumentParser()
    locomo.add_arguments(parser)
    return parser, data


def test_locomo_floor_report_counts_cut_evidence_and_emptied_off_topic_questions(tmp_path):
    import json

    from navi_memory.bench import locomo, locomo_floor

    parser, data = _two_conversations(tmp_path)
    out = tmp_path / "floor.json"
    report = locomo.run(parser.parse_args(["--data", str(data), "--embeddings", "hashing", "--floor",
                                           "--floor-credits", "0,1", "--json", str(out)]))["floor"]
    assert report["credits"] == [0.0, 1.0] and report["floors"] == list(locomo_floor.FLOORS)
    assert len(locomo_floor.OFF_TOPIC) == 20
    counts = report["counts"]["1.0"]["0.7"]
    assert set(counts) == {"conv-t", "conv-u"}
    # both questions share a content word with their evidence turn: with credit 1 no floor cuts it
    assert counts["conv-t"]["evidence"] == 2 and counts["conv-t"]["cut"] == 0
    assert report["counts"]["0.0"]["0.7"]["conv-t"]["cut"] == 2  # by cosine alone 0.7 cuts both
    assert counts["conv-t"]["off_topic"] == 20 and 0 <= counts["conv-t"]["emptied"] <= 20
    for part in report["by_budget"]:
        assert [row["held_out"] for row in part["leave_one_out"]] == ["conv-t", "conv-u"]
        chosen = part["chosen_on_all"]
        assert chosen["credit"] in (0.0, 1.0) and report["overall"][str(chosen["credit"])][str(chosen["floor"])][
            "cut"] <= part["cut_budget"]
    assert json.loads(out.read_text())["floor"]["by_budget"] == report["by_budget"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", str(data), "--floor-credits", "2"])


def test_locomo_leave_one_out_chooses_on_the_others_and_reports_the_held_out(tmp_path):
    from navi_memory.bench import locomo, locomo_loo

    parser, data = _two_conversations(tmp_path)
    report = locomo.run(parser.parse_args(["--data", str(data), "--embeddings", "hashing", "--loo"]))["loo"]
    assert [f["held_out"] for f in report["leave_one_out"]["folds"]] == ["conv-t", "conv-u"]
    assert set(report["settings"]) >= {locomo_loo.label(s) for s in locomo_loo.settings()}  # + the defaults
    assert report["leave_one_out"]["questions"] == 4 and report["default"]["questions"] == 4
    assert report["default"]["setting"].startswith("semantic_weight 0.6, context_weight 0.2, PERSON_FOCUS 0.7,")
    assert {f["held_out"] for f in report["leave_one_out_focus"]["folds"]} == {"conv-t", "conv-u"}
    # two identical conversations: each fold chooses what is best on the other, which is best on all
    assert {f["chosen"] for f in report["leave_one_out"]["folds"]} == {report["best_on_all"]["setting"]}
    assert report["leave_one_out"]["recall"] == report["best_on_all"]["recall"]
    assert "leave-one-out" in locomo_loo.format_report(report)


def test_locomo_grid_reorders_a_page_as_the_search_ordered_it(tmp_path):
    """The grid re-scores pages from each result's rank key less its boosts: with the product's own
    boosts that is the search's own order (``score`` is relevance, not what orders the page)."""
    from navi_memory import MemoryStore
    from navi_memory.bench import locomo_loo
    from navi_memory.embeddings import HashingEmbeddings
    from navi_memory.retrieval import rerank

    texts = ["We moved to Lisbon in May 2023", "Biscuit the puppy chewed my shoes yesterday",
             "Pottery class is on Tuesday", "When did we go to Lisbon? Last May", "Lisbon trip photos",
             "My teacher lives in Lisbon", "A puppy needs a walk every morning"]
    with MemoryStore.open(f"sqlite:///{tmp_path / 'grid.db'}", HashingEmbeddings(64)) as store:
        for n, text in enumerate(texts):
            store.add(user_id="u", content=text, metadata={"dia_id": f"D1:{n}"})
        for query in ("When did we move to Lisbon?", "puppy shoes", "what happened on 8 May 2023 in Lisbon"):
            found = store.search(query, user_id="u", limit=10, min_score=0)
            cands: dict = {}
            locomo_loo._candidates(found, cands)
            boosts = {"WHEN_BOOST": rerank.WHEN_BOOST, "DATE_BOOST": rerank.DATE_BOOST}
            assert locomo_loo._ranked(cands, boosts) == [r.metadata["dia_id"] for r in found][:max(locomo_loo.KS)]


def test_bench_embedding_cache_asks_the_model_once_per_text(tmp_path):
    from navi_memory.bench.embed_cache import CachedEmbeddings, cached
    from navi_memory.embeddings import Embedder, HashingEmbeddings

    asked: list[str] = []

    class Counting(HashingEmbeddings):
        def embed_documents(self, texts):
            asked.extend(texts)
            return super().embed_documents(texts)

    first = CachedEmbeddings(Counting(64), "m", tmp_path)
    vectors = first.embed_documents(["a b", "c d", "a b"])
    assert asked == ["a b", "c d"] and vectors[0] == vectors[2]
    again = CachedEmbeddings(Counting(64), "m", tmp_path)
    assert again.embed_documents(["c d"]) == [vectors[1]] and asked == ["a b", "c d"]
    assert again.embed_query("a b") == vectors[0] and (again.hits, again.misses) == (2, 0)
    CachedEmbeddings(Counting(64), "other", tmp_path).embed_query("a b")  # another model: asked again
    assert asked == ["a b", "c d", "a b"]
    wrapped = cached(Embedder(lambda: Counting(64), "hashing-64", 64), tmp_path)
    assert wrapped is not None and wrapped.model_name == "hashing-64" and cached(None) is None
    assert len(wrapped.embed_query("x y")) == 64


@pytest.mark.parametrize("content, expected", [
    (b"{bad", "is not JSON"), (b"\xff\xfe", "not UTF-8 text"), (b"[]", "is not LoCoMo data"),
    (b"[{}]", "is not LoCoMo data"), (b"42", "is not LoCoMo data")])
def test_bench_locomo_with_data_that_is_not_locomo_is_one_line_and_exit_2(tmp_path, capsys, content, expected):
    from navi_memory.cli import main

    data = tmp_path / "data.json"
    data.write_bytes(content)
    code = main(["--db", f"sqlite:///{tmp_path}/b.db", "bench", "locomo", "--data", str(data), "--embeddings", "hashing"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and expected in lines[0] and "Traceback" not in err, err


@pytest.mark.parametrize("size", ["inf", "1e400", "-5", "x"])
def test_bench_latency_sizes_that_are_not_sizes_are_refused(size):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="size"):
        latency._sizes(size)
