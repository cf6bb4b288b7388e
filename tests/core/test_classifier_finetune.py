"""The fine-tuned classifier, cross-validation and label restriction, on a tiny BERT built here.

The encoder is a randomly initialised 2-layer BERT (hidden 32) with a
WordPiece vocabulary of the test's own words, saved as a real transformers
folder: the same loading, training and artefact code paths as all-MiniLM-L6-v2.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from training.classifier.crossval import (
    bootstrap_ci,
    cross_validate,
    paired_difference,
    stratified_folds,
    stratified_split,
)
from training.classifier.finetune import FineTuneConfig, fine_tune
from training.classifier.metrics import classification_report
from typed_rag.classifier import build_classifier, restrict
from typed_rag.classifier.base import TypeClassifier
from typed_rag.classifier.finetune import (
    ARTEFACT_NAME,
    FineTunedClassifier,
    FineTunedMeta,
    load_artefact,
    read_meta,
    save_artefact,
)
from typed_rag.config import load_settings
from typed_rag.errors import UserError
from typed_rag.types import LABELS, QuestionType

# One cue word per type, so a working fine-tuning separates them in a few epochs.
CUES = ["hello", "when", "should", "how", "steps", "why", "anyone", "versus"]
FILLER = ["the", "a", "cat", "dog", "river", "music", "city", "tree", "bread", "car"]


def _questions(n_per: int, seed: int) -> tuple[list[str], list[int]]:
    rng = np.random.default_rng(seed)
    qs, ys = [], []
    for label, cue in enumerate(CUES):
        for _ in range(n_per):
            words = list(rng.choice(FILLER, size=4))
            words.insert(int(rng.integers(0, 5)), cue)
            qs.append(" ".join(words).capitalize() + "?")
            ys.append(label)
    return qs, ys


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "?", *CUES, *FILLER]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    tok.save_pretrained(str(folder))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    BertModel(config).save_pretrained(str(folder))
    return folder


CONFIG = FineTuneConfig(lr=3e-3, head_lr=1e-2, epochs=5, batch_size=16, max_length=16, threads=1)


@pytest.fixture(scope="module")
def trained(tiny_bert: Path):
    q_tr, y_tr = _questions(16, seed=1)
    q_va, y_va = _questions(4, seed=2)
    return fine_tune(tiny_bert, q_tr, y_tr, q_va, y_va, CONFIG, seed=5), (q_va, y_va)


def test_fine_tuning_learns_and_keeps_the_best_epoch(trained) -> None:
    (res, _, enc_config), (_, y_va) = trained
    assert enc_config["model_type"] == "bert"
    assert len(res.history) == CONFIG.epochs
    best = max(h["valid_macro_f1"] for h in res.history)
    assert res.history[res.best_epoch - 1]["valid_macro_f1"] == best
    report = classification_report(y_va, res.valid_logits.argmax(axis=1))
    assert report.macro_f1 == pytest.approx(best)
    assert best > 0.4  # 8 types, chance 0.125


def test_same_seed_same_weights(tiny_bert: Path, trained) -> None:
    (res, _, _), _ = trained
    q_tr, y_tr = _questions(16, seed=1)
    q_va, y_va = _questions(4, seed=2)
    again, _, _ = fine_tune(tiny_bert, q_tr, y_tr, q_va, y_va, CONFIG, seed=5)
    a, b = res.model.state_dict(), again.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_soup_averages_members_that_start_alike_and_its_first_is_the_single_run(
    tiny_bert: Path, trained
) -> None:
    from dataclasses import replace

    from training.classifier.finetune import average_states

    (single, _, _), _ = trained
    q_tr, y_tr = _questions(16, seed=1)
    q_va, y_va = _questions(4, seed=2)
    soup, tok, _ = fine_tune(tiny_bert, q_tr, y_tr, q_va, y_va, replace(CONFIG, soup=3), seed=5)
    assert len(soup.members) == 3 and len(soup.history) == 3 * CONFIG.epochs
    first = single.model.state_dict()
    assert all(torch.equal(soup.members[0][k], first[k]) for k in first)
    assert not torch.equal(soup.members[0]["classify.weight"], soup.members[1]["classify.weight"])
    averaged = soup.model.state_dict()
    mean = torch.stack([m["classify.weight"] for m in soup.members]).mean(dim=0)
    assert torch.allclose(averaged["classify.weight"], mean)
    assert torch.equal(average_states(soup.members)["classify.bias"], averaged["classify.bias"])
    # The soup's valid logits are its own, and it still separates the types.
    report = classification_report(y_va, soup.valid_logits.argmax(axis=1))
    assert report.macro_f1 > 0.4


def _save(tmp_path: Path, trained, temperature: float = 1.5) -> tuple[Path, FineTunedMeta]:
    (res, _, enc_config), _ = trained
    meta = FineTunedMeta(
        base="tiny", encoder_config=enc_config, temperature=temperature, max_length=16, seed=5
    )
    path = tmp_path / "home" / "classifier" / ARTEFACT_NAME
    save_artefact(path, res.model, meta)
    return path, meta


def test_artefact_round_trip_gives_the_same_probabilities(
    tmp_path: Path, tiny_bert: Path, trained
) -> None:
    from transformers import AutoTokenizer

    (res, tok, _), (q_va, _) = trained
    path, meta = _save(tmp_path, trained)
    model, loaded_meta, lexical = load_artefact(path)
    assert lexical is None
    assert loaded_meta == FineTunedMeta(**json.loads(json.dumps(meta.__dict__)))
    clf = FineTunedClassifier(model, AutoTokenizer.from_pretrained(str(tiny_bert)), meta)
    probs = np.array(clf.predict_proba(q_va))
    assert probs.shape == (len(q_va), 8)
    assert np.allclose(probs.sum(axis=1), 1.0)
    direct = FineTunedClassifier(res.model, tok, meta).logits(q_va)
    expected = torch.softmax(torch.from_numpy(direct) / 1.5, dim=-1).numpy()
    assert np.allclose(probs, expected, atol=1e-5)
    # lower-casing: the same question in capitals gets the same probabilities
    assert np.allclose(clf.predict_proba([q_va[0].upper()]), probs[:1], atol=1e-5)
    assert clf.predict_proba([]) == []


def test_build_classifier_loads_finetuned_kind(tmp_path: Path, tiny_bert: Path, trained) -> None:
    (res, _, enc_config), (q_va, _) = trained
    home = tmp_path / "home"
    meta = FineTunedMeta(base=str(tiny_bert), encoder_config=enc_config, max_length=16)
    save_artefact(home / "classifier" / ARTEFACT_NAME, res.model, meta)
    settings = load_settings(None, **{"home": str(home), "classifier.kind": "finetuned"})
    clf = build_classifier(settings)
    assert isinstance(clf, FineTunedClassifier)
    preds = clf.predict(q_va[:3])
    assert all(p.type in LABELS for p in preds)


def _write_csv(path: Path, questions: list[str], labels: list[int]) -> Path:
    import csv

    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["annotated_by", "category", "question"])
        w.writerows(["test", LABELS[y].value, q] for q, y in zip(questions, labels, strict=True))
    return path


def test_train_finetuned_with_lexical_part_saves_what_it_scored(
    tmp_path: Path, tiny_bert: Path
) -> None:
    """``lexical=True`` joins the lexical part to the fine-tuned encoder: the saved
    classifier gives the probabilities the training report scored, and they are the geometric
    mean of both."""
    from training.classifier.train import train_finetuned_classifier
    from typed_rag.classifier.head import combine

    q_tr, y_tr = _questions(16, seed=1)
    q_va, y_va = _questions(4, seed=2)
    train_csv = _write_csv(tmp_path / "train.csv", q_tr, y_tr)
    valid_csv = _write_csv(tmp_path / "valid.csv", q_va, y_va)
    settings = load_settings(
        None,
        **{
            "home": str(tmp_path / "home"),
            "classifier.kind": "finetuned",
        },
    )
    summary = train_finetuned_classifier(
        settings, base=str(tiny_bert), seed=5, train_path=train_csv, valid_path=valid_csv,
        config=CONFIG, echo=lambda _: None, lexical=True,
    )  # fmt: skip
    clf = build_classifier(settings)
    assert isinstance(clf, FineTunedClassifier) and clf.lexical is not None
    assert clf.lexical.vocabulary.feature_set == "plus"
    probs = np.array(clf.predict_proba(q_va))
    report = classification_report(np.asarray(y_va), probs.argmax(axis=1))
    assert report.macro_f1 == pytest.approx(summary.valid.macro_f1)
    alone = torch.softmax(torch.from_numpy(clf.logits(q_va)) / clf.meta.temperature, -1).numpy()
    z = clf.lexical.model(torch.from_numpy(clf.lexical.vocabulary.transform(q_va))).detach()
    lex = torch.softmax(z / clf.lexical.temperature, -1).numpy()
    assert np.allclose(probs, combine([alone, lex], clf.lexical.ensemble_temperature), atol=1e-5)
    assert read_meta(summary.artefact).lexical == clf.lexical.meta()


def test_missing_or_foreign_artefact_is_a_user_error(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    with pytest.raises(UserError, match="typed-rag classifier train"):
        load_artefact(tmp_path / ARTEFACT_NAME)
    path = tmp_path / ARTEFACT_NAME
    save_file({"w": torch.zeros(2)}, str(path), metadata={"format": "typed-rag/type-head/1"})
    with pytest.raises(UserError, match="not a fine-tuned typed-rag classifier"):
        read_meta(path)
    path.write_bytes(b"garbage")
    with pytest.raises(UserError, match="not a readable classifier artefact"):
        load_artefact(path)


def test_train_if_missing_for_finetuned_kind(
    tmp_path: Path, trained, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import training.classifier.train as training
    from cli.main import main

    (res, _, enc_config), _ = trained
    home = tmp_path / "home"
    meta = FineTunedMeta(base="all-MiniLM-L6-v2", encoder_config=enc_config, seed=42)
    save_artefact(home / "classifier" / ARTEFACT_NAME, res.model, meta)
    calls: list[int] = []

    def fake_train(settings, *, seed, **kwargs):
        calls.append(seed)
        raise UserError("training was called")

    monkeypatch.setattr(training, "train_finetuned_classifier", fake_train)
    # saved without a lexical part, so up to date only where none is wanted (finetuned: none)
    no_lex = ["--set", f"home={home}"]
    base = [*no_lex, "classifier", "train", "--kind", "finetuned", "--if-missing"]
    assert main(base) == 0 and calls == []
    assert "classifier up to date" in capsys.readouterr().out
    assert main([*base, "--seed", "7"]) == 2 and calls == [7]
    kind_set = [*no_lex, "--set", "classifier.kind=finetuned"]
    assert main([*kind_set, "classifier", "train", "--if-missing"]) == 0 and calls == [7]
    by_default = ["--set", f"home={home}", "classifier", "train", "--if-missing"]
    assert main(by_default) == 0 and calls == [7]  # the default kind, without a lexical part
    monkeypatch.setattr(training, "joins_lexical", lambda kind: True)
    assert main(by_default) == 2 and calls == [7, 42]  # a lexical part is wanted: retrain
    assert main(["--set", f"home={home}", "--set", "classifier.kind=nfcats",
                 "classifier", "train"]) == 2  # fmt: skip
    assert "not trained here" in capsys.readouterr().err


# ---- restricting predictions to some types ------------------------------------


class FixedClassifier(TypeClassifier):
    def __init__(self, rows: list[list[float]]) -> None:
        self.rows = rows

    def predict_proba(self, questions):
        return self.rows[: len(questions)]


def test_restrict_renormalises_over_allowed_types() -> None:
    row = [0.5, 0.3, 0.1, 0.05, 0.02, 0.01, 0.01, 0.01]  # NOT-A-QUESTION, FACTOID on top
    non_factoid = [
        t for t in LABELS if t not in (QuestionType.NOT_A_QUESTION, QuestionType.FACTOID)
    ]
    (out,) = restrict([row], non_factoid)
    assert out[0] == out[1] == 0.0
    assert sum(out) == pytest.approx(1.0)
    assert out[2] == pytest.approx(0.1 / 0.2)
    clf = FixedClassifier([row])
    (plain,) = clf.predict(["q"])
    assert plain.type is QuestionType.NOT_A_QUESTION
    (p,) = clf.predict(["q"], min_confidence=0.45, allowed=non_factoid)
    assert p.type is QuestionType.DEBATE and p.confident  # 0.5 after renormalising
    (p,) = clf.predict(["q"], min_confidence=0.55, allowed=["debate", "Evidence-Based"])
    assert p.type is QuestionType.DEBATE and p.top_probability == pytest.approx(0.1 / 0.15)
    (u,) = restrict([[1.0] + [0.0] * 7], ["REASON", "EXPERIENCE"])
    assert u[5] == u[6] == 0.5
    with pytest.raises(ValueError, match="unknown question type"):
        restrict([row], ["OPINION"])
    with pytest.raises(ValueError, match="at least one"):
        restrict([row], [])


# ---- cross-validation ---------------------------------------------------------------


def test_folds_are_disjoint_stratified_and_cover_everything() -> None:
    y = np.repeat(np.arange(8), [50, 40, 30, 20, 12, 9, 7, 5])
    folds = stratified_folds(y, 5, seed=1)
    allidx = np.concatenate(folds)
    assert sorted(allidx.tolist()) == list(range(len(y)))
    for label, n in enumerate([50, 40, 30, 20, 12, 9, 7, 5]):
        per = [int((y[f] == label).sum()) for f in folds]
        assert max(per) - min(per) <= 1 and sum(per) == n
    rest = np.setdiff1d(np.arange(len(y)), folds[0])
    fit, sel = stratified_split(rest, y, 0.2, seed=3)
    assert len(np.intersect1d(fit, sel)) == 0 and len(fit) + len(sel) == len(rest)
    assert int((y[sel] == 0).sum()) == 8  # 20% of the 40 zeros outside fold 0
    assert stratified_folds(y, 5, seed=1)[2].tolist() == folds[2].tolist()


def test_cross_validate_scores_held_out_predictions_only() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 8, 400)
    seen: list[tuple[set[int], set[int], set[int]]] = []

    def oracle_on_test(fit: np.ndarray, select: np.ndarray, test: np.ndarray) -> np.ndarray:
        seen.append((set(fit.tolist()), set(select.tolist()), set(test.tolist())))
        return np.eye(8)[y[test]] * 0.9 + 0.1 / 8  # right on every held-out row

    res = cross_validate(oracle_on_test, y, k=4, seed=0, bootstrap=50)
    assert res.report.macro_f1 == 1.0 and res.fold_macro_f1 == [1.0] * 4
    for fit, select, test in seen:
        assert not (fit & test) and not (select & test) and not (fit & select)
        assert len(fit | select | test) == 400
    d = res.to_dict()
    assert d["k"] == 4 and d["ci95"]["macro_f1"] == [1.0, 1.0]
    assert json.loads(json.dumps(d))["n"] == 400


def test_bootstrap_interval_contains_the_estimate_and_shrinks_with_n() -> None:
    rng = np.random.default_rng(1)

    def width(n: int) -> float:
        y = rng.integers(0, 8, n)
        pred = np.where(rng.random(n) < 0.7, y, rng.integers(0, 8, n))
        ci = bootstrap_ci(y, pred, n=300, seed=0)
        f1 = classification_report(y, pred).macro_f1
        assert ci["macro_f1"][0] <= f1 <= ci["macro_f1"][1]
        return ci["macro_f1"][1] - ci["macro_f1"][0]

    assert width(4000) < width(250)


def test_paired_difference_finds_the_label_one_recipe_fixes() -> None:
    rng = np.random.default_rng(2)
    y = rng.integers(0, 8, 2000)
    noisy = np.where(rng.random(2000) < 0.8, y, rng.integers(0, 8, 2000))
    fixed = np.where(y == 6, y, noisy)  # B, then every EXPERIENCE (label 6) put right
    d = paired_difference(y, fixed, noisy, n=300, seed=0)
    assert d["f1"]["EXPERIENCE"]["ci"][0] > 0 < d["macro_f1"]["ci"][0]
    assert d["macro_f1"]["diff"] == pytest.approx(
        classification_report(y, fixed).macro_f1 - classification_report(y, noisy).macro_f1
    )
    same = paired_difference(y, noisy, noisy, n=50, seed=0)
    assert same["macro_f1"] == {"diff": 0.0, "ci": [0.0, 0.0]}


def test_top_layer_training_freezes_the_rest_and_matches_a_full_forward(tiny_bert: Path) -> None:
    from transformers import AutoModel

    q_tr, y_tr = _questions(16, seed=1)
    q_va, y_va = _questions(4, seed=2)
    cfg = FineTuneConfig(
        lr=3e-3, head_lr=1e-2, epochs=5, batch_size=16, max_length=16, threads=1, train_layers=1
    )
    res, tok, _ = fine_tune(tiny_bert, q_tr, y_tr, q_va, y_va, cfg, seed=5)
    before = AutoModel.from_pretrained(str(tiny_bert), add_pooling_layer=False).state_dict()
    after = res.model.encoder.state_dict()
    assert all(
        torch.equal(before[k], after[k]) for k in before if not k.startswith("encoder.layer.1.")
    )
    assert not torch.equal(
        before["encoder.layer.1.output.dense.weight"], after["encoder.layer.1.output.dense.weight"]
    )
    assert all(p.requires_grad for p in res.model.parameters())
    # the kept epoch's valid logits are what the whole model computes from token ids
    direct = FineTunedClassifier(res.model, tok, FineTunedMeta(base="t", encoder_config={})).logits(
        q_va
    )
    assert np.allclose(direct, res.valid_logits, atol=1e-5)
    assert max(h["valid_macro_f1"] for h in res.history) > 0.3


@pytest.mark.gpu
def test_fine_tuning_on_cuda_learns_and_its_logits_match_the_cpu_forward(tiny_bert: Path) -> None:
    """``FineTuneConfig.device`` runs the whole loop on the GPU (the bench's ``--device cuda``);
    the kept weights, moved to the CPU, give the same valid logits."""
    from dataclasses import replace

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    q_tr, y_tr = _questions(16, seed=1)
    q_va, y_va = _questions(4, seed=2)
    res, tok, _ = fine_tune(tiny_bert, q_tr, y_tr, q_va, y_va, replace(CONFIG, device="cuda"), 5)
    assert next(res.model.parameters()).is_cuda
    assert max(h["valid_macro_f1"] for h in res.history) > 0.4
    on_cpu = FineTunedClassifier(res.model.cpu(), tok, FineTunedMeta(base="t", encoder_config={}))
    assert np.allclose(on_cpu.logits(q_va), res.valid_logits, atol=1e-3)
