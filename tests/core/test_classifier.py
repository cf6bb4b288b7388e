"""Unit tests of the classifier's parts that need no model: data, metrics, head, artefact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from training.classifier.calibration import fit_temperature, nll
from training.classifier.data import read_nfcats_csv
from training.classifier.head import HeadConfig, class_weights, train_head
from training.classifier.metrics import classification_report, confidence_table, format_report
from typed_rag.classifier import build_classifier
from typed_rag.classifier.embedding_head import (
    ARTEFACT_NAME,
    EmbeddingHeadClassifier,
    HeadMeta,
    load_artefact,
    save_artefact,
)
from typed_rag.classifier.head import MLPHead, softmax
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.types import LABELS, QuestionType

# ---- data -----------------------------------------------------------------


def test_reads_quoted_multiline_questions(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text(
        "annotated_by,category,question\n"
        'authors,COMPARISON,"Tea or coffee,\nwhich is better?"\n'
        "mturk,instruction,How do I bake bread?\n",
        encoding="utf-8",
    )
    data = read_nfcats_csv(path)
    assert data.questions == ["Tea or coffee,\nwhich is better?", "How do I bake bread?"]
    assert [LABELS[i] for i in data.labels] == [
        QuestionType.COMPARISON,
        QuestionType.INSTRUCTION,
    ]
    assert data.counts()["COMPARISON"] == 1


def test_bad_label_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "valid.csv"
    path.write_text(
        'annotated_by,category,question\na,FACTOID,"two\nlines"\na,OPINION,What now?\n',
        encoding="utf-8",
    )
    with pytest.raises(UserError, match=r"valid\.csv:4: unknown question type 'OPINION'"):
        read_nfcats_csv(path)


def test_missing_column_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("annotated_by,label,text\na,FACTOID,hi\n", encoding="utf-8")
    with pytest.raises(UserError, match="missing column"):
        read_nfcats_csv(path)
    with pytest.raises(UserError, match="NF-CATS data file not found"):
        read_nfcats_csv(tmp_path / "nope.csv")


# ---- metrics --------------------------------------------------------------


def test_report_matches_hand_computation() -> None:
    y_true = [0, 0, 1, 1, 2]
    y_pred = [0, 1, 1, 1, 0]
    r = classification_report(y_true, y_pred)
    assert r.accuracy == pytest.approx(3 / 5)
    c0, c1, c2 = r.per_class[:3]
    assert (c0.precision, c0.recall, c0.f1) == pytest.approx((0.5, 0.5, 0.5))
    assert (c1.precision, c1.recall, c1.f1) == pytest.approx((2 / 3, 1.0, 0.8))
    assert (c2.precision, c2.recall, c2.f1, c2.support) == (0.0, 0.0, 0.0, 1)
    # Classes absent from both lists count as F1 0 in the macro average (8 labels).
    assert r.macro_f1 == pytest.approx((0.5 + 0.8) / 8)
    assert r.confusion[2][0] == 1 and r.confusion[0][1] == 1
    text = format_report(r)
    assert "macro-F1=0.1625" in text and "COMPARISON" in text


def test_confidence_table_splits_by_top_probability() -> None:
    probs = np.array([[0.9, 0.1], [0.35, 0.65], [0.55, 0.45], [0.3, 0.7]])
    probs = np.pad(probs, ((0, 0), (0, 6)))
    rows = confidence_table(probs, [0, 1, 1, 0], [0.6])
    assert rows[0]["below"] == 1  # only the 0.55 row
    assert rows[0]["below_accuracy"] == 0.0
    assert rows[0]["above_accuracy"] == pytest.approx(2 / 3)


# ---- head, calibration ----------------------------------------------------


def _clusters(n_per: int, seed: int, dim: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).normal(size=(8, dim)) * 3
    y = np.repeat(np.arange(8), n_per)
    x = centres[y] + rng.normal(size=(len(y), dim))
    return x.astype(np.float32), y


def test_head_learns_and_is_deterministic() -> None:
    x_tr, y_tr = _clusters(30, seed=1)
    x_va, y_va = _clusters(10, seed=2)
    cfg = HeadConfig(hidden=32, max_epochs=15)
    a = train_head(x_tr, y_tr, x_va, y_va, cfg, seed=7)
    b = train_head(x_tr, y_tr, x_va, y_va, cfg, seed=7)
    assert a.valid_macro_f1 > 0.9
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k])


def test_class_weights_lift_rare_classes() -> None:
    y = np.array([0] * 90 + [1] * 10)
    w = class_weights(y, power=0.5, n_labels=2)
    assert w[1] / w[0] == pytest.approx(3.0)
    assert torch.allclose(class_weights(y, 0.0, 2), torch.ones(2))


def test_temperature_recovers_overconfidence() -> None:
    rng = np.random.default_rng(0)
    z = rng.normal(size=(4000, 8)) * 1.5
    p = softmax(z)
    y = np.array([rng.choice(8, p=row) for row in p])
    t = fit_temperature(z * 4.0, y)  # the true logits, made 4x too sharp
    assert t == pytest.approx(4.0, rel=0.15)
    assert nll(z * 4.0, y, t) < nll(z * 4.0, y, 1.0)


# ---- artefact and classifier ---------------------------------------------


class StubEncoder:
    """Stands in for a sentence-transformers model: records inputs, embeds by letters."""

    def __init__(self, dim: int = 26) -> None:
        self.dim = dim
        self.seen: list[str] = []

    def get_sentence_embedding_dimension(self) -> int:
        return self.dim

    def encode(self, texts: list[str], **_: object) -> np.ndarray:
        self.seen.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t:
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1.0
        return out


def _saved_head(tmp_path: Path, temperature: float = 2.0) -> tuple[Path, MLPHead]:
    torch.manual_seed(0)
    head = MLPHead(26, 8).eval()
    meta = HeadMeta(embedder="stub", dim=26, hidden=8, temperature=temperature, seed=3)
    path = tmp_path / "clf" / ARTEFACT_NAME
    save_artefact(path, head, meta)
    return path, head


def test_artefact_round_trip(tmp_path: Path) -> None:
    path, head = _saved_head(tmp_path)
    loaded, meta = load_artefact(path)
    assert meta.embedder == "stub" and meta.temperature == 2.0 and meta.seed == 3
    assert meta.labels == [t.value for t in LABELS]
    x = torch.randn(4, 26)
    assert torch.allclose(loaded(x), head(x))


def test_classifier_lowercases_and_scales(tmp_path: Path) -> None:
    path, head = _saved_head(tmp_path, temperature=2.0)
    loaded, meta = load_artefact(path)
    enc = StubEncoder()
    clf = EmbeddingHeadClassifier(enc, loaded, meta, batch_size=2)  # type: ignore[arg-type]
    probs = np.array(clf.predict_proba(["Why Is The Sky BLUE?", "how to bake", "tea or coffee"]))
    assert enc.seen[0] == "why is the sky blue?"
    assert probs.shape == (3, 8)
    assert np.allclose(probs.sum(axis=1), 1.0)
    x = torch.from_numpy(enc.encode(["why is the sky blue?"]))
    expected = torch.softmax(head(x) / 2.0, dim=-1).detach().numpy()[0]
    assert np.allclose(probs[0], expected, atol=1e-6)
    assert clf.predict_proba([]) == []
    preds = clf.predict(["why is the sky blue?"], min_confidence=1.01)
    assert preds[0].confident is False


def test_wrong_embedder_dimension_is_a_user_error(tmp_path: Path) -> None:
    path, _ = _saved_head(tmp_path)
    head, meta = load_artefact(path)
    with pytest.raises(UserError, match="retrain"):
        EmbeddingHeadClassifier(StubEncoder(dim=10), head, meta)  # type: ignore[arg-type]


def test_missing_artefact_tells_user_to_train(settings: Settings) -> None:
    with pytest.raises(UserError, match="typed-rag classifier train"):
        build_classifier(settings)


def test_foreign_file_is_rejected(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    path = tmp_path / ARTEFACT_NAME
    save_file({"w": torch.zeros(2)}, str(path), metadata={"format": "other"})
    with pytest.raises(UserError, match="not a typed-rag classifier artefact"):
        load_artefact(path)
    path.write_bytes(b"garbage")
    with pytest.raises(UserError, match="not a readable classifier artefact"):
        load_artefact(path)


def test_metrics_json_is_plain_json(tmp_path: Path) -> None:
    # The artefact's metadata must survive a JSON round trip (it is read by humans too).
    path, _ = _saved_head(tmp_path)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()["meta"])
    assert meta["embedder"] == "stub" and meta["dim"] == 26


def test_train_if_missing_keeps_a_matching_artefact_and_retrains_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Set-up runs ``classifier train --if-missing`` on every start: it must not retrain."""
    import training.classifier.train as training
    from cli.main import main
    from typed_rag.classifier.lexical import LexicalPart, LinearModel, Vocabulary

    home = tmp_path / "home"
    head = MLPHead(26, 8)
    lex = LexicalPart(Vocabulary(["why"], [1.0]), LinearModel(1), 1.0, 1.0)
    meta = HeadMeta(embedder="all-MiniLM-L6-v2", dim=26, hidden=8, seed=42)
    save_artefact(home / "classifier" / ARTEFACT_NAME, head, meta, lex)
    trained: list[int] = []

    def fake_train(settings, *, seed, **kwargs):
        trained.append(seed)
        raise UserError("training was called")

    monkeypatch.setattr(training, "train_classifier", fake_train)
    base = [
        "--set",
        f"home={home}",
        "classifier",
        "train",
        "--kind",
        "embedding-head",
        "--if-missing",
    ]
    assert main(base) == 0 and trained == []
    assert "classifier up to date" in capsys.readouterr().out
    assert main([*base, "--seed", "7"]) == 2 and trained == [7]  # other seed: retrain
    joins_lexical = training.joins_lexical
    monkeypatch.setattr(training, "joins_lexical", lambda kind: False)
    assert main(base) == 2 and trained == [7, 42]  # other features wanted: retrain
    monkeypatch.setattr(training, "joins_lexical", joins_lexical)
    (home / "classifier" / ARTEFACT_NAME).write_bytes(b"garbage")
    assert main(base) == 2 and trained == [7, 42, 42]  # unreadable artefact: retrain


# ---- lexical features -----------------------------------------------------------


def test_lexical_features_mark_openers_and_pairs() -> None:
    from training.classifier.lexical import fit_vocabulary
    from typed_rag.classifier.lexical import features

    f = features("What's the DIFFERENCE between tea and coffee?")
    assert {"^what's", "^what's the", "difference between", "tea", "?"} <= f
    vocab = fit_vocabulary(["why is it", "why not", "how to do it", "how to"], min_df=2)
    assert set(vocab.terms) == {"why", "^why", "how", "to", "how to", "^how", "^how to", "it"}
    x = vocab.transform(["Why", "how to", "nothing known"])
    assert x.shape == (3, len(vocab.terms))
    assert np.allclose(np.linalg.norm(x[:2], axis=1), 1.0) and not x[2].any()
    assert x[0, vocab.terms.index("^why")] > 0 and x[0, vocab.terms.index("how")] == 0


def test_classifier_with_lexical_model_round_trips_and_combines(tmp_path: Path) -> None:
    from training.classifier.lexical import fit_vocabulary
    from typed_rag.classifier.embedding_head import load_artefact_with_lexical
    from typed_rag.classifier.lexical import LexicalPart, LinearModel

    vocab = fit_vocabulary(["why is it", "why not", "how to do it", "how to"], min_df=2)
    torch.manual_seed(0)
    head = MLPHead(26, 8).eval()
    lexical = LinearModel(len(vocab.terms))
    torch.nn.init.normal_(lexical.weight)
    part = LexicalPart(vocab, lexical, temperature=2.0, ensemble_temperature=0.5, info={"l2": 0.1})
    meta = HeadMeta(embedder="stub", dim=26, hidden=8, temperature=1.5)
    path = tmp_path / ARTEFACT_NAME
    save_artefact(path, head, meta, part)
    loaded, meta2, lex2 = load_artefact_with_lexical(path)
    assert meta2.lexical == part.meta() and lex2 is not None
    assert lex2.info == {"l2": 0.1} and lex2.vocabulary == vocab
    assert torch.equal(lex2.model.weight, lexical.weight)
    clf = EmbeddingHeadClassifier(StubEncoder(), loaded, meta2, lexical=lex2)  # type: ignore[arg-type]
    qs = ["Why not?", "how to bake"]
    probs = np.array(clf.predict_proba(qs))
    p = softmax(
        head(torch.from_numpy(StubEncoder().encode([q.lower() for q in qs]))).detach().numpy(), 1.5
    )
    z = lexical(torch.from_numpy(vocab.transform(qs))).detach().numpy()
    q = softmax(z, 2.0)
    expected = softmax((np.log(p) + np.log(q)) / 2, 0.5)
    assert np.allclose(probs, expected, atol=1e-6)
    # An artefact written before feature sets existed reads as the base set.
    old_meta = {k: v for k, v in part.meta().items() if k != "feature_set"}
    old = LexicalPart.from_artefact(old_meta, part.tensors("x."), "x.", 8)
    assert old.vocabulary.feature_set == "base" and np.allclose(old.join(p, qs), expected)


def test_richer_features_add_trigrams_and_closing_words() -> None:
    from training.classifier.lexical import fit_vocabulary
    from typed_rag.classifier.lexical import features, features_plus

    q = "Which is better for beginners, tea or coffee?"
    plus = features_plus(q)
    assert features(q) < plus
    assert {"^which is better", "or coffee ?$", "?$", "tea or coffee"} <= plus
    qs = ["is tea better?", "is coffee better?", "why is tea hot"]
    vocab = fit_vocabulary(qs, min_df=2, feature_set="plus")
    assert "better ?$" in vocab.terms and vocab.feature_set == "plus"
    assert vocab.transform(["is milk better?"])[0, vocab.terms.index("better ?$")] > 0
    with pytest.raises(UserError, match="unknown lexical feature set 'chars'"):
        fit_vocabulary(qs, feature_set="chars")


def test_linear_model_learns_cue_words() -> None:
    from training.classifier.lexical import fit_vocabulary, train_linear
    from typed_rag.classifier.lexical import linear_logits

    cues = ["why", "how", "best", "difference"]
    rng = np.random.default_rng(0)
    filler = ["tea", "car", "city", "music", "bread"]

    def make(n: int) -> tuple[list[str], np.ndarray]:
        y = np.repeat(np.arange(4), n)
        return [f"{cues[c]} {' '.join(rng.choice(filler, 3))}" for c in y], y

    q_tr, y_tr = make(20)
    q_va, y_va = make(5)
    vocab = fit_vocabulary(q_tr)
    model, l2 = train_linear(vocab.transform(q_tr), y_tr, vocab.transform(q_va), y_va, steps=100)
    pred = linear_logits(model, vocab.transform(q_va)).argmax(axis=1)
    assert (pred == y_va).mean() == 1.0 and l2 in (1e-5, 1e-4, 1e-3)


# ---- several embedders -------------------------------------------------------------


def test_concatenated_embedders_feed_one_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedder named ``"a+b"`` loads both models and the head reads both vectors."""
    import typed_rag.encoder as encoder
    from typed_rag.encoder import ConcatEncoder, embed_questions, embedding_dim

    loaded: list[str] = []

    def fake_load(settings: Settings, name: str, device: str) -> StubEncoder:
        loaded.append(name)
        return StubEncoder()

    monkeypatch.setattr(encoder, "_load_one", fake_load)
    enc = encoder.load_sentence_model(Settings(), "a+b")
    assert loaded == ["a", "b"] and isinstance(enc, ConcatEncoder)
    assert embedding_dim(enc) == 52  # type: ignore[arg-type]
    x = embed_questions(enc, ["Why Not?"])  # type: ignore[arg-type]
    single = StubEncoder().encode(["why not?"])
    assert x.shape == (1, 52) and np.array_equal(x, np.hstack([single, single]))
    torch.manual_seed(0)
    head = MLPHead(52, 8).eval()
    meta = HeadMeta(embedder="a+b", dim=52, hidden=8)
    clf = EmbeddingHeadClassifier(enc, head, meta)  # type: ignore[arg-type]
    assert np.allclose(np.sum(clf.predict_proba(["why not?", "how"]), axis=1), 1.0)
    assert encoder.load_sentence_model(Settings(), "a") is not None and loaded[-1] == "a"
    with pytest.raises(ValueError, match="at least one"):
        ConcatEncoder([])
