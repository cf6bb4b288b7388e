"""Settings resolved once (issue 78): ``resolve_settings`` leaves no ``auto``, never changes an
explicit value, keeps the declared settings for collections and fingerprints, and the
system builder, ``typed-rag config show --resolved`` and the reranker fallback agree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from typed_rag.config import Settings, load_settings
from typed_rag.config_resolve import resolve_settings
from typed_rag.cpuinfo import llama_threads
from typed_rag.errors import UserError
from typed_rag.retrieval.collections import collection_settings
from typed_rag.retrieval.dense import dense_folder
from typed_rag.retrieval.manifest import write_manifest
from typed_rag.system import TypedRAG


def autos(value: Any, path: str = "") -> Iterator[str]:
    """The dotted keys of every ``auto`` left anywhere in a JSON-like value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from autos(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from autos(v, f"{path}[{i}]")
    elif isinstance(value, str) and value.strip().lower() == "auto":
        yield path


def declared(tmp_path: Path, **overrides: Any) -> Settings:
    return load_settings(None, home=str(tmp_path / "home"), **overrides)


def with_dense_index(
    settings: Settings, folder: Path | None = None, dtype: str = "bfloat16"
) -> None:
    """A finished dense index of the default encoder in ``folder``, as far as the
    manifests tell (what ``auto`` reads; no vectors needed to decide)."""
    dense = dense_folder(folder or settings.index_dir, settings.retrieval.dense_model)
    dense.mkdir(parents=True)
    manifest = {"complete": True, "model": settings.retrieval.dense_model, "compute_dtype": dtype}
    write_manifest(dense, manifest)


CONFIGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "llama-server": {"engine.backend": "llama-server"},
    "vllm, explicit dtype": {"engine.backend": "vllm", "engine.dtype": "bfloat16"},
    "openai with keys": {
        "engine.backend": "openai",
        "engine.base_url": "http://llm:8080/v1",
        "server.api_key": "k",
    },
    "nfcats, bge asked": {"classifier.kind": "nfcats", "reranker.bge_model": "BAAI/bge"},
    "auto kind": {"retrieval.kind": "auto"},
}


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_no_auto_is_left_anywhere(tmp_path: Path, overrides: dict[str, Any]) -> None:
    settings = declared(tmp_path, **overrides)
    assert list(autos(settings.model_dump(mode="json")))  # there is something to resolve
    resolved = resolve_settings(settings)
    assert list(autos(resolved.model_dump(mode="json"))) == []
    assert resolved.resolved and not settings.resolved
    assert resolved.declared() is settings
    assert resolve_settings(resolved) is resolved  # once: a second call changes nothing


def test_what_each_auto_became_here(tmp_path: Path) -> None:
    settings = declared(tmp_path, **{"engine.backend": "llamacpp", "server.api_key": "k"})
    r = resolve_settings(settings)
    assert r.retrieval.index_dir == settings.home / "indexes" / "wiki-bm25"
    assert r.retrieval.backend in ("numpy", "numba")
    assert (r.retrieval.kind, r.retrieval.rerank_depth) == ("bm25", 20)
    assert r.retrieval.rerank_floor == 0.32  # the MiniLM bi-encoder's calibrated floor
    assert r.retrieval.dense_dtype == "float32"  # no dense search: nothing measured
    assert r.reranker.kind == "biencoder"
    assert r.classifier.path == settings.home / "classifier"
    assert r.engine.n_threads == llama_threads()
    assert r.engine.dtype is None  # vLLM's only
    assert r.engine.model_source == "pypi,hub" and r.engine.sources() == ("pypi", "hub")
    assert r.documents.uploads == "on"  # auto with a key
    assert resolve_settings(declared(tmp_path)).documents.uploads == "off"  # without one
    # The one auto kept: vLLM's own dtype value, which vLLM decides from the model's config
    vllm = resolve_settings(declared(tmp_path, **{"engine.backend": "vllm"}))
    assert vllm.engine.dtype == "auto" and vllm.engine.n_threads is None
    assert list(autos(vllm.model_dump(mode="json"))) == ["engine.dtype"]


def test_auto_follows_the_index_folder(tmp_path: Path) -> None:
    """A folder with a finished dense index: hybrid, no rerank, its encoder's dtype, and
    no timing (an index keeps the dtype it was encoded in)."""
    settings = declared(tmp_path, **{"retrieval.kind": "auto"})
    with_dense_index(settings)
    r = resolve_settings(settings)
    assert (r.retrieval.kind, r.retrieval.rerank_depth) == ("hybrid", 0)
    assert r.retrieval.dense_dtype == "bfloat16"


EXPLICIT: dict[str, Any] = {
    "retrieval.backend": "numpy",
    "retrieval.kind": "dense",
    "retrieval.dense_dtype": "float32",
    "retrieval.rerank_depth": 7,
    "retrieval.rerank_floor": 0.5,
    "reranker.kind": "none",
    "reranker.bge_model": "BAAI/bge",
    "classifier.path": "my/classifier",
    "engine.backend": "llamacpp",
    "engine.n_threads": 3,
    "engine.dtype": "float16",
    "engine.model_source": "hub",
    "documents.uploads": "on",
}


def test_an_explicit_value_is_never_overridden(tmp_path: Path) -> None:
    settings = declared(tmp_path, **EXPLICIT, **{"retrieval.index_dir": str(tmp_path / "ix")})
    with_dense_index(settings, dtype="bfloat16")  # would pin an auto dtype to bfloat16
    resolved = resolve_settings(settings)
    assert resolved.model_dump() == settings.model_dump()
    none = resolve_settings(declared(tmp_path, **{"retrieval.rerank_floor": "none"}))
    assert none.retrieval.rerank_floor is None  # "no floor" stays no floor


def test_a_collection_is_resolved_for_its_own_folder(tmp_path: Path) -> None:
    """The default index has no dense index, the collection has: each its own ``auto``."""
    settings = declared(tmp_path, **{"retrieval.kind": "auto"})
    notes = settings.home / "collections" / "notes"
    notes.mkdir(parents=True)
    write_manifest(notes, {"collection": {"files": {}}})
    with_dense_index(settings, notes)
    resolved = resolve_settings(settings)
    assert resolved.retrieval.kind == "bm25"
    of_notes = collection_settings(resolved, "notes")
    assert not of_notes.resolved and of_notes.retrieval.kind == "auto"
    assert resolve_settings(of_notes).retrieval.kind == "hybrid"


def test_with_section_keeps_the_declared_twin_in_step(tmp_path: Path) -> None:
    resolved = resolve_settings(declared(tmp_path))
    paper = resolved.with_section("method", profile="paper")
    assert paper.resolved and paper.declared().method.profile == "paper"
    assert paper.retrieval.rerank_depth == 20 and paper.declared().retrieval.rerank_depth == "auto"


def test_eval_fingerprints_record_the_declared_settings(tmp_path: Path) -> None:
    pytest.importorskip("eval.runs.manifest")
    from eval.runs.manifest import fingerprint
    from eval.settings import LabSettings

    lab = load_settings(
        None, cls=LabSettings, home=str(tmp_path / "home"), **{"retrieval.kind": "auto"}
    )
    with_dense_index(lab)
    resolved = resolve_settings(lab)
    assert resolved.retrieval.kind == "hybrid"
    assert fingerprint(resolved, resolved) == fingerprint(lab, lab)


def test_the_system_builder_resolves_once(tmp_path: Path) -> None:
    settings = declared(
        tmp_path, **{"engine.backend": "fake", "mode": "llm", "reranker.kind": "none"}
    )
    rag = TypedRAG.from_settings(settings)
    assert rag.settings.resolved and rag.settings.declared() is settings
    assert list(autos(rag.settings.model_dump(mode="json"))) == []
    assert rag.collections.resolve is resolve_settings


def test_bge_asked_by_auto_falls_back_and_the_settings_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import typed_rag.rerank as rerank

    def no_bge(settings: Settings) -> Any:
        raise UserError("no such model")

    class StubBiEncoder(rerank.BiEncoderReranker):
        def __init__(self) -> None:  # no model loaded
            pass

    monkeypatch.setattr(rerank.BGEReranker, "from_settings", classmethod(lambda c, s: no_bge(s)))
    monkeypatch.setattr(
        rerank.BiEncoderReranker, "from_settings", classmethod(lambda c, s: StubBiEncoder())
    )
    settings = declared(
        tmp_path, **{"engine.backend": "fake", "mode": "llm", "reranker.bge_model": "nowhere"}
    )
    assert resolve_settings(settings).reranker.kind == "bge"  # asked for, before loading
    rag = TypedRAG.from_settings(settings)
    assert isinstance(rag.reranker, StubBiEncoder)
    assert rag.settings.reranker.kind == "biencoder"
    assert rag.settings.retrieval.rerank_floor is None  # BGE was asked: no MiniLM floor
    with pytest.raises(UserError):  # an explicit bge does not fall back
        TypedRAG.from_settings(settings.with_section("reranker", kind="bge"))


def test_config_show_resolved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = ["--set", f"home={tmp_path / 'home'}", "--set", "retrieval.top_k=3"]
    assert main([*home, "config", "show", "--resolved", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert list(autos(shown)) == []
    assert shown["retrieval"]["top_k"] == 3 and shown["retrieval"]["kind"] == "bm25"
    assert shown["engine"]["model_source"] == "pypi,hub"

    assert main([*home, "config", "show", "--resolved"]) == 0
    lines = capsys.readouterr().out.splitlines()
    values = dict(line.split(None, 1) for line in lines if line and line[0] != " " and "  " in line)
    assert not [k for k, v in values.items() if v.split("  ")[0] == '"auto"']
    assert values["retrieval.rerank_depth"] == "20  (decided here)"
    assert values["retrieval.top_k"] == "3"
