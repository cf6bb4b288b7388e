"""``GET /v1/config`` over real HTTP: the settings the real app's system was built with (the
fake engine, a real BM25 index), every ``auto`` resolved, no key, token or server path."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx

from indexes import build_index
from tests.conftest import TINY_PASSAGES, write_tsv
from tests.core.test_config_resolve import autos
from tests.serving.conftest import live_server, make_rag, server_settings, wait_healthy
from typed_rag.config_resolve import resolve_settings

KEY = "sekret-server-key"
ENGINE_KEY = "sk-engine-key"
HUB_TOKEN = "hf_hub_token"
URL_PASSWORD = "url-password"


def test_config_is_resolved_and_shows_no_secret_or_path(tmp_path: Path) -> None:
    corpus = write_tsv(tmp_path / "tiny.tsv", TINY_PASSAGES)
    settings = server_settings(
        tmp_path,
        **{
            "corpus.path": str(corpus),
            "server.api_key": KEY,
            "engine.api_key": ENGINE_KEY,
            "engine.hub_token": HUB_TOKEN,
            "engine.base_url": f"http://typed:{URL_PASSWORD}@llm.internal:8080/v1",
            "engine.model": str(tmp_path / "models" / "qwen.gguf"),
            "reranker.kind": "none",  # explicit: kept (and no encoder to load)
            "retrieval.top_k": 3,
        },
    )
    build_index(settings, show_progress=False, workers=0)
    with live_server(settings, None, wait=False) as srv:  # None: the app builds the system
        wait_healthy(srv.url, 300)  # numba and bm25s import for a while on a busy machine
        assert httpx.get(srv.api + "/config", timeout=10).status_code == 401
        r = httpx.get(srv.api + "/config", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        built = srv.app.state.typed_rag.rag.settings
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "config"
    shown = body["settings"]
    assert list(autos(shown)) == []
    assert built.resolved and built.declared().retrieval.rerank_depth == "auto"
    # the values the system was built with
    assert shown["retrieval"]["top_k"] == 3 and shown["reranker"]["kind"] == "none"
    assert (shown["retrieval"]["kind"], shown["retrieval"]["rerank_depth"]) == ("bm25", 20)
    assert shown["retrieval"]["backend"] == built.retrieval.backend
    assert shown["documents"]["uploads"] == "on"  # auto, with a key set
    assert shown["engine"]["model_source"] == "pypi,hub"
    # secrets: redacted where set, null where not
    for secret in (KEY, ENGINE_KEY, HUB_TOKEN, URL_PASSWORD):
        assert secret not in r.text
    assert shown["server"]["api_key"] == shown["engine"]["api_key"] == "<redacted>"
    assert shown["engine"]["hub_token"] == "<redacted>"
    assert shown["engine"]["base_url"] == "http://<redacted>@llm.internal:8080/v1"
    # paths: the home as <home>, anything else by its last part (as /health's errors)
    for secret in (str(tmp_path), str(tmp_path.resolve()), tempfile.gettempdir() + "/"):
        assert secret not in r.text
    assert str(Path.home()) + "/" not in r.text
    assert shown["home"] == "<home>"
    assert shown["retrieval"]["index_dir"] == "<home>/indexes/wiki-bm25"
    assert shown["classifier"]["path"] == "<home>/classifier"
    assert shown["engine"]["model"] == "<path>/qwen.gguf"
    assert shown["corpus"]["path"] == "<path>/tiny.tsv"


def test_config_of_a_ready_made_system_is_resolved_too(tmp_path: Path) -> None:
    """A server given its TypedRAG (tests, replicas) resolves the settings it was given."""
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings)) as srv:
        r = httpx.get(srv.api + "/config", timeout=30)
        doc = httpx.get(srv.url + "/openapi.json", timeout=10).json()
    assert r.status_code == 200, r.text
    shown = r.json()["settings"]
    assert list(autos(shown)) == []
    assert shown["documents"]["uploads"] == "off"  # auto, without a key
    expected = resolve_settings(settings)
    assert shown["retrieval"]["rerank_floor"] == expected.retrieval.rerank_floor
    assert shown["engine"]["n_threads"] is None  # the fake engine runs no llama.cpp
    ok = doc["paths"]["/v1/config"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["$ref"].endswith("/ConfigResponse")
