"""Asking about a collection over HTTP and from Python: the ``collection`` field, the
``GET /v1/collections`` list, and traces whose passages cite file, page and section."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.documents.makers import shop_settings
from tests.serving.conftest import live_server, make_rag
from typed_rag.config import Settings
from typed_rag.request import AnswerRequest, RequestError


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return shop_settings(tmp_path)


def ask(url: str, **extra: object) -> httpx.Response:
    body = {
        "model": "rag",
        "messages": [{"role": "user", "content": "How often is the hydraulic oil changed?"}],
        "include_trace": True,
        **extra,
    }
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=60)


def test_http_collection_field_and_listing(settings: Settings) -> None:
    with live_server(settings, make_rag(settings)) as srv:
        listed = httpx.get(srv.api + "/collections", timeout=10).json()
        cards = {c["id"]: c for c in listed["data"]}
        assert listed["object"] == "list" and set(cards) == {"wiki", "shop"}
        assert cards["shop"]["files"] == 2 and cards["shop"]["kind"] == "documents"
        assert "folder" not in cards["shop"]

        r = ask(srv.url, collection="shop")
        assert r.status_code == 200, r.text
        passages = r.json()["typed_rag"]["trace"]["passages"]
        top = passages[0]
        assert (Path(top["source"]).name, top["page"], top["section"]) == (
            "press.pdf",
            2,
            "Hydraulics",
        )
        assert top["title"] == "Press Brake Manual — Hydraulics"

        default = ask(srv.url).json()["typed_rag"]["trace"]["passages"]
        assert all(p["source"] is None and p["page"] is None for p in default)

        bad = ask(srv.url, collection="nope")
        assert bad.status_code == 404
        error = bad.json()["error"]
        assert error["param"] == "collection"
        assert "unknown collection 'nope' (known: wiki, shop)" in error["message"]
        traversal = ask(srv.url, collection="../shop")
        assert traversal.status_code == 400 and "invalid collection name" in traversal.text


async def test_python_api_answers_from_a_collection(settings: Settings) -> None:
    rag = make_rag(settings)
    async with rag:
        result = await rag.answer("Top up the coolant how often?", mode="rag", collection="shop")
    assert Path(result.passages[0].source or "").name == "notes.md"
    assert result.passages[0].section == "Coolant" and result.passages[0].page is None
    with pytest.raises(RequestError, match="unknown collection 'lake'"):
        AnswerRequest("q", collection="lake").resolve(settings)
