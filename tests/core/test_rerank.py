"""Rerankers: the bi-encoder with the real MiniLM, the BGE path with a random XLM-R cross-encoder."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

from tests.conftest import TINY_PASSAGES
from typed_rag.config import Settings, load_settings
from typed_rag.errors import UserError
from typed_rag.rerank import build_reranker
from typed_rag.rerank.bge import BGEReranker
from typed_rag.rerank.biencoder import BiEncoderReranker
from typed_rag.retrieval import Passage
from typed_rag.retrieval.text import passage_text

PASSAGES = [
    Passage(id=pid, title=title, text=text, score=1.0) for pid, title, text in TINY_PASSAGES
]


@pytest.fixture(scope="module")
def minilm_path() -> Path:
    """The real all-MiniLM-L6-v2 folder, pulled once into the user's model cache."""
    from typed_rag.models import ensure_model

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return ensure_model(load_settings(), "all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def biencoder(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> BiEncoderReranker:
    home = tmp_path_factory.mktemp("home")
    s = load_settings(None, **{"home": str(home), "reranker.biencoder_model": str(minilm_path)})
    return BiEncoderReranker.from_settings(s)


@pytest.fixture(scope="module")
def xlmr_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised XLM-R cross-encoder (num_labels=1) with a Unigram tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
        XLMRobertaTokenizerFast,
    )

    folder = tmp_path_factory.mktemp("xlmr")
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=200, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"
    )
    tok.train_from_iterator([f"{t} {x}" for _, t, x in TINY_PASSAGES], trainer)
    tok.add_special_tokens(["<mask>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    wrapped = XLMRobertaTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
    )
    wrapped.save_pretrained(folder)
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(wrapped),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=300,
        num_labels=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    XLMRobertaForSequenceClassification(config).save_pretrained(folder)
    return folder


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    return load_settings(None, **{"home": str(tmp_path / "home"), **overrides})


def test_passage_text_is_title_dot_text() -> None:
    assert passage_text(Passage("1", "Tea", "A drink.")) == "Tea. A drink."
    assert passage_text(Passage("1", "", "A drink.")) == "A drink."
    assert passage_text(Passage("1", "What is tea?", "A drink.")) == "What is tea? A drink."


# ---- bi-encoder (real MiniLM) -------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("why do leaves turn red and yellow in the fall?", "p1"),
        ("how do I make a loaf of bread in my oven", "p7"),
        ("what is the capital city of France", "p11"),
    ],
)
def test_biencoder_ranks_relevant_passage_first(
    biencoder: BiEncoderReranker, query: str, expected: str
) -> None:
    top = biencoder.rerank(query, PASSAGES, top_k=3)
    assert top[0].id == expected
    assert len(top) == 3


def test_biencoder_scores_are_cosines_in_order(biencoder: BiEncoderReranker) -> None:
    scores = biencoder.score("caffeine in coffee and tea", PASSAGES)
    assert len(scores) == len(PASSAGES)
    assert all(-1.0001 <= s <= 1.0001 for s in scores)
    ranked = biencoder.rerank("caffeine in coffee and tea", PASSAGES, top_k=len(PASSAGES))
    got = [p.rerank_score for p in ranked]
    assert got == sorted(got, reverse=True)
    assert {p.id for p in ranked[:2]} == {"p5", "p6"}
    assert ranked[0].score == 1.0  # the retriever's score is kept
    assert biencoder.rerank("anything", [], top_k=3) == []


def test_build_reranker_choices(
    tmp_path: Path, minilm_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert build_reranker(_settings(tmp_path, **{"reranker.kind": "none"})) is None
    base = {"reranker.biencoder_model": str(minilm_path)}
    assert isinstance(build_reranker(_settings(tmp_path, **base)), BiEncoderReranker)
    missing = str(tmp_path / "no-bge-here")
    with caplog.at_level(logging.WARNING, logger="typed_rag.rerank"):
        fallback = build_reranker(_settings(tmp_path, **base, **{"reranker.bge_model": missing}))
    assert isinstance(fallback, BiEncoderReranker)
    assert "BGE reranker unavailable" in caplog.text
    with pytest.raises(UserError, match="no-bge-here"):
        build_reranker(
            _settings(tmp_path, **{"reranker.kind": "bge", "reranker.bge_model": missing})
        )
    with pytest.raises(UserError, match="needs reranker.bge_model"):
        build_reranker(_settings(tmp_path, **{"reranker.kind": "bge"}))


# ---- BGE path (random XLM-R cross-encoder) -----------------------------------


def test_bge_end_to_end_on_cpu(tmp_path: Path, xlmr_folder: Path) -> None:
    s = _settings(tmp_path, **{"reranker.bge_model": str(xlmr_folder)})  # fp16 by default
    reranker = build_reranker(s)  # kind auto + an existing model folder -> BGE
    assert isinstance(reranker, BGEReranker)
    assert reranker.use_fp16 is False  # fp16 is for CUDA only
    assert reranker.model.target_devices == ["cpu"]  # pinned: no process pool
    scores = reranker.score("why do leaves change color", PASSAGES)
    assert len(scores) == len(PASSAGES) and all(isinstance(x, float) for x in scores)
    ranked = reranker.rerank("why do leaves change color", PASSAGES, top_k=5)
    assert len(ranked) == 5
    by_id = {p.id: sc for p, sc in zip(PASSAGES, scores, strict=True)}
    assert [p.rerank_score for p in ranked] == pytest.approx(sorted(scores, reverse=True)[:5])
    assert all(by_id[p.id] == pytest.approx(p.rerank_score) for p in ranked)
    assert len(reranker.score("one passage", PASSAGES[:1])) == 1
    assert reranker.score("none", []) == []


def test_bge_normalize_is_sigmoid(xlmr_folder: Path) -> None:
    raw = BGEReranker(xlmr_folder, device="cpu", fp16=False)
    norm = BGEReranker(xlmr_folder, device="cpu", fp16=False, normalize=True)
    a = raw.score("bread", PASSAGES[:4])
    b = norm.score("bread", PASSAGES[:4])
    assert b == pytest.approx([1 / (1 + math.exp(-x)) for x in a], abs=1e-5)
