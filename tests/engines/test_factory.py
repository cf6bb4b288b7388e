"""build_engine picks the backend from settings and resolves the model; imports stay light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from typed_rag.config import Settings, load_settings
from typed_rag.engines import build_engine
from typed_rag.engines.factory import resolve_vllm_model
from typed_rag.engines.fake import FakeEngine
from typed_rag.engines.llamacpp import PROMPT_CACHE_MIB, LlamaCppEngine
from typed_rag.engines.openai_client import OpenAIEngine
from typed_rag.errors import UserError


def with_engine(tmp_path: Path, **engine: object) -> Settings:
    return load_settings(
        **{"home": str(tmp_path / "home")}, **{f"engine.{k}": v for k, v in engine.items()}
    )


def test_fake_backend(settings: Settings) -> None:
    assert isinstance(build_engine(settings), FakeEngine)


def test_llamacpp_backend_uses_a_local_gguf_and_settings(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    eng = build_engine(
        with_engine(
            tmp_path,
            backend="llamacpp",
            model=str(gguf),
            n_ctx=1024,
            n_threads=3,
        )
    )
    assert isinstance(eng, LlamaCppEngine)
    assert (eng.model_path, eng.n_ctx, eng.n_threads, eng.prompt_cache.budget_bytes) == (
        gguf.resolve(),
        1024,
        3,
        PROMPT_CACHE_MIB * 2**20,
    )


def test_llamacpp_backend_rejects_unknown_models(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown model 'nope'"):
        build_engine(with_engine(tmp_path, backend="llamacpp", model="nope"))


def test_openai_backend_needs_a_base_url(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="engine.base_url"):
        build_engine(with_engine(tmp_path, backend="openai"))
    eng = build_engine(
        with_engine(
            tmp_path,
            backend="openai",
            base_url="http://127.0.0.1:9/v1",
            model="served-name",
            openai_json_mode="json_object",
        )
    )
    assert isinstance(eng, OpenAIEngine)
    assert (eng.model, eng.max_retries, eng.json_mode) == ("served-name", 3, "json_object")


def test_vllm_model_resolution(tmp_path: Path) -> None:
    settings = with_engine(tmp_path)
    assert resolve_vllm_model(settings, "Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    assert resolve_vllm_model(settings, str(tmp_path)) == str(tmp_path.resolve())
    with pytest.raises(UserError, match="unknown model"):
        resolve_vllm_model(settings, "not-a-model")


def test_importing_the_package_loads_no_backend_library() -> None:
    code = (
        "import sys, typed_rag.engines, typed_rag.models, cli.models;"
        "heavy = {'vllm', 'llama_cpp', 'torch', 'transformers', 'openai'} & set(sys.modules);"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
async def test_built_llamacpp_engine_answers_with_the_registry_model() -> None:
    from typed_rag.engines.base import ChatRequest

    settings = load_settings(
        **{
            "engine.backend": "llamacpp",
            "engine.model": "smollm2",
            "engine.n_ctx": 1024,
            "engine.n_threads": 1,
        }
    )
    async with build_engine(settings) as eng:
        (res,) = await eng.generate(
            [ChatRequest(messages=[{"role": "user", "content": "Say hi."}], max_tokens=8, seed=1)]
        )
    assert eng.model == "smollm2" and res.text and 0 < res.completion_tokens <= 8
