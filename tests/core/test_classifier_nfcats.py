"""The nf-cats checkpoint loader, on a small randomly initialised checkpoint of the same layout.

The test writes weights under the original checkpoint's key names
(``embedder.*``, ``pooler.dense.*``, ``feedforward.linear_layers.N.*``,
``feedforward.classification_layer.*``) and checks the classifier against a
forward pass computed here from those raw tensors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from typed_rag.classifier import build_classifier
from typed_rag.classifier.nfcats import NFCatsClassifier, map_state_dict
from typed_rag.config import Settings, load_settings
from typed_rag.errors import UserError
from typed_rag.types import LABELS

HIDDEN = 32
HEAD = (HIDDEN, 24)  # the real checkpoint: (768, 512)
CORPUS = [
    "why do leaves change color in autumn",
    "how to bake bread at home",
    "what is the capital of france",
    "is nuclear power good or bad",
    "what are the differences between tea and coffee",
    "has anyone backpacked in europe",
]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import RobertaTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 3, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return RobertaTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
    )


def _write_checkpoint(folder: Path, id2label: dict[int, str], seed: int = 0) -> dict:
    """A tiny checkpoint in the published layout; returns its raw state dict."""
    from transformers import RobertaConfig, RobertaModel

    torch.manual_seed(seed)
    tokenizer = _tokenizer()
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=80,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    encoder = RobertaModel(config, add_pooling_layer=True)
    state = {f"embedder.{k}": v.clone() for k, v in encoder.state_dict().items()}
    dims = [HIDDEN, *HEAD]

    def linear(prefix: str, d_in: int, d_out: int) -> None:
        state[f"{prefix}.weight"] = torch.randn(d_out, d_in) / d_in**0.5
        state[f"{prefix}.bias"] = torch.randn(d_out) * 0.1

    linear("pooler.dense", HIDDEN, HIDDEN)
    for i in range(len(HEAD)):
        linear(f"feedforward.linear_layers.{i}", dims[i], dims[i + 1])
    linear("feedforward.classification_layer", HEAD[-1], len(id2label))
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))
    return state


def _reference_probs(folder: Path, state: dict, questions: list[str]) -> np.ndarray:
    """The published forward pass, computed from the raw tensors."""
    from transformers import AutoTokenizer, RobertaConfig, RobertaModel

    config = RobertaConfig.from_pretrained(folder)
    enc = RobertaModel(config, add_pooling_layer=True)
    enc.load_state_dict(
        {k[len("embedder.") :]: v for k, v in state.items() if k.startswith("embedder.")}
    )
    enc.eval()
    tok = AutoTokenizer.from_pretrained(folder)
    out = []
    with torch.no_grad():
        for q in questions:
            ids = tok(q.lower(), return_tensors="pt")
            h = enc(**ids).last_hidden_state[:, 0]
            x = torch.tanh(h @ state["pooler.dense.weight"].T + state["pooler.dense.bias"])
            for i in range(len(HEAD)):
                w, b = (
                    state[f"feedforward.linear_layers.{i}.weight"],
                    state[f"feedforward.linear_layers.{i}.bias"],
                )
                x = torch.nn.functional.mish(x @ w.T + b)
            logits = x @ state["feedforward.classification_layer.weight"].T
            logits = logits + state["feedforward.classification_layer.bias"]
            out.append(torch.softmax(logits, -1)[0].numpy())
    return np.stack(out)


NFCATS_ORDER = {i: t.value for i, t in enumerate(LABELS)}
QUESTIONS = ["Why do leaves change COLOR in autumn?", "How to bake bread", "tea or coffee?"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("nfcats")
    return folder, _write_checkpoint(folder, NFCATS_ORDER)


def _settings(tmp_path: Path, path: Path | str, **extra: str) -> Settings:
    return load_settings(
        None,
        **{
            "home": str(tmp_path / "home"),
            "classifier.kind": "nfcats",
            "classifier.path": str(path),
        },
        **extra,
    )


def test_loads_published_layout_and_matches_reference(tmp_path: Path, checkpoint) -> None:
    folder, state = checkpoint
    clf = build_classifier(_settings(tmp_path, folder))
    assert isinstance(clf, NFCatsClassifier)
    assert [m.out_features for m in clf.model.hidden_layers] == list(HEAD)
    probs = np.array(clf.predict_proba(QUESTIONS))
    assert probs.shape == (3, 8)
    assert np.allclose(probs, _reference_probs(folder, state, QUESTIONS), atol=1e-5)
    # Batched (padded) prediction agrees with one-at-a-time prediction.
    clf.batch_size = 1
    assert np.allclose(np.array(clf.predict_proba(QUESTIONS)), probs, atol=1e-5)
    preds = clf.predict(QUESTIONS)
    assert [p.type for p in preds] == [LABELS[int(i)] for i in probs.argmax(axis=1)]


def test_label_order_follows_config(tmp_path: Path, checkpoint) -> None:
    folder, _ = checkpoint
    reference = np.array(build_classifier(_settings(tmp_path, folder)).predict_proba(QUESTIONS))
    # Same weights, but the config says the outputs are in reversed label order.
    permuted = tmp_path / "permuted"
    state = _write_checkpoint(permuted, {i: t.value for i, t in enumerate(reversed(LABELS))})
    probs = np.array(build_classifier(_settings(tmp_path, permuted)).predict_proba(QUESTIONS))
    raw = _reference_probs(permuted, state, QUESTIONS)
    assert np.allclose(probs, raw[:, ::-1], atol=1e-5)
    # Same seed, same weights: only the meaning of the columns changed.
    assert np.allclose(probs, reference[:, ::-1], atol=1e-5)


def test_map_state_dict_rejects_foreign_keys() -> None:
    state = {
        "pooler.dense.weight": torch.zeros(4, 4),
        "feedforward.classification_layer.weight": torch.zeros(8, 4),
        "classifier.out_proj.weight": torch.zeros(8, 4),
    }
    with pytest.raises(UserError, match="unexpected weights classifier.out_proj.weight"):
        map_state_dict(state)
    with pytest.raises(UserError, match="no weights for classify.weight"):
        map_state_dict({"pooler.dense.weight": torch.zeros(4, 4)})


def test_missing_folder_and_unreachable_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UserError, match="no such folder"):
        build_classifier(_settings(tmp_path, tmp_path / "no" / "such" / "dir"))

    def offline(*_a: object, **_k: object) -> None:
        raise OSError("network unreachable")

    monkeypatch.setattr("huggingface_hub.snapshot_download", offline)
    with pytest.raises(UserError, match="cannot fetch 'Lurunchik/nf-cats'.*classifier.path"):
        build_classifier(_settings(tmp_path, "Lurunchik/nf-cats"))


def test_folder_without_weights(tmp_path: Path, checkpoint) -> None:
    folder, _ = checkpoint
    empty = tmp_path / "ckpt"
    empty.mkdir()
    (empty / "config.json").write_text((folder / "config.json").read_text())
    with pytest.raises(UserError, match="no model.safetensors or pytorch_model.bin"):
        build_classifier(_settings(tmp_path, empty))
