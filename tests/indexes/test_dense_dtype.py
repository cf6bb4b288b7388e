"""``retrieval.dense_dtype = auto``: the measured choice, its cache, and indexes keeping theirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import typed_rag.retrieval.dense_dtype as dd
from typed_rag.config import Settings, load_settings


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setattr(dd, "_chosen", {})
    monkeypatch.setattr(dd, "cpu_has_bf16", lambda: True)
    return load_settings(None, home=str(tmp_path / "home"))


def _speeds(monkeypatch: pytest.MonkeyPatch, bf16: float, f32: float) -> list[int]:
    calls: list[int] = []

    def probe(settings: Settings) -> dict[str, float]:
        calls.append(1)
        return {"bfloat16": bf16, "float32": f32}

    monkeypatch.setattr(dd, "probe_speeds", probe)
    return calls


@pytest.mark.parametrize(
    ("bf16", "f32", "chosen"),
    [(31.3, 16.3, "bfloat16"), (48.7, 70.5, "float32"), (50.0, 48.0, "float32")],
)
def test_auto_on_a_bf16_cpu_takes_the_measurably_faster_dtype(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, bf16: float, f32: float, chosen: str
) -> None:
    """2x faster bfloat16 is taken, slower is not, and a 4% edge is not worth leaving float32."""
    _speeds(monkeypatch, bf16, f32)
    assert dd.compute_dtype(settings) == chosen


def test_the_choice_is_measured_once_and_cached_on_disk(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _speeds(monkeypatch, 48.7, 70.5)
    assert dd.compute_dtype(settings) == "float32"
    assert dd.compute_dtype(settings) == "float32"
    assert len(calls) == 1
    cache = json.loads((settings.home / "cache" / "dense-dtype.json").read_text())
    (entry,) = cache.values()
    assert entry["dtype"] == "float32" and entry["passages_per_s"]["bfloat16"] == 48.7
    monkeypatch.setattr(dd, "_chosen", {})  # a new process reads the file, does not probe
    assert dd.compute_dtype(settings) == "float32" and len(calls) == 1


def test_a_damaged_cache_is_measured_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = settings.home / "cache" / "dense-dtype.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    calls = _speeds(monkeypatch, 31.3, 16.3)
    assert dd.compute_dtype(settings) == "bfloat16" and len(calls) == 1
    assert json.loads(path.read_text())  # rewritten whole


def test_explicit_dtypes_and_cpus_without_bf16_never_probe(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _speeds(monkeypatch, 31.3, 16.3)
    for dt in dd.DTYPES:
        pinned = load_settings(None, home=str(settings.home), **{"retrieval.dense_dtype": dt})
        assert dd.compute_dtype(pinned) == dt
    monkeypatch.setattr(dd, "cpu_has_bf16", lambda: False)
    assert dd.compute_dtype(settings) == "float32"
    assert calls == []


def test_an_index_keeps_the_dtype_it_was_encoded_in_under_auto(settings: Settings) -> None:
    kept = dd.with_index_dtype(settings, {"compute_dtype": "bfloat16"})
    assert kept.retrieval.dense_dtype == "bfloat16"
    assert dd.with_index_dtype(settings, None) is settings
    assert dd.with_index_dtype(settings, {"compute_dtype": "int8"}) is settings
    pinned = load_settings(None, **{"retrieval.dense_dtype": "float32"})
    assert dd.with_index_dtype(pinned, {"compute_dtype": "bfloat16"}) is pinned
