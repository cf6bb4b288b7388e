"""Resumable, checksum-checked download of corpus files (``typed-rag corpus download``).

Bytes go to ``<dest>.part``; a later run sends ``Range: bytes=<size>-`` and appends, so
an interrupted multi-GB download resumes instead of restarting (a server that ignores
Range answers 200 and the file starts over). The checksum is computed while streaming
(including over the bytes already on disk when resuming) and checked before the part
file is renamed to its final name; on a mismatch the part file is deleted.

The registry holds only facts known for sure. DPR publishes no checksum for
``psgs_w100.tsv.gz``, so none is built in: pass ``--sha256`` (or ``--md5``) to verify
against a value you trust; the command always prints the sha256 it computed.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import httpx
from tqdm.auto import tqdm

from typed_rag.errors import UserError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resource:
    """A downloadable corpus; checksums only where published."""

    url: str
    filename: str
    description: str
    sha256: str | None = None
    md5: str | None = None


REGISTRY: dict[str, Resource] = {
    "dpr-wiki": Resource(
        url="https://dl.fbaipublicfiles.com/dpr/wikipedia_split/psgs_w100.tsv.gz",
        filename="psgs_w100.tsv.gz",
        description=(
            "DPR Wikipedia (Dec. 2018 dump) split into 21,015,324 passages of 100 words, "
            "id/text/title TSV, gzip; no published checksum"
        ),
    ),
}


@dataclass
class DownloadResult:
    """Where the file is and what was checked."""

    path: Path
    bytes: int
    sha256: str
    resumed_from: int = 0
    verified: str | None = None  # "sha256" or "md5" when a checksum was compared
    already_present: bool = False


def download(
    url: str,
    dest: str | Path,
    *,
    sha256: str | None = None,
    md5: str | None = None,
    force: bool = False,
    show_progress: bool = True,
    chunk_size: int = 1 << 20,
    timeout_s: float = 60.0,
    transport: httpx.BaseTransport | None = None,
) -> DownloadResult:
    """Fetch ``url`` to ``dest``, resuming from ``dest.part`` and checking the checksum."""
    dest = Path(dest)
    sha256 = _check_hex("sha256", sha256, 64)
    md5 = _check_hex("md5", md5, 32)
    part = dest.with_name(dest.name + ".part")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create download folder {dest.parent}: {exc}") from exc

    if dest.exists() and not force:
        return _verify_existing(dest, sha256, md5)
    if force:
        part.unlink(missing_ok=True)

    offset = part.stat().st_size if part.exists() else 0
    hashers = {"sha256": hashlib.sha256()}
    if md5:
        hashers["md5"] = hashlib.md5()
    headers = {"Accept-Encoding": "identity"}  # byte ranges must refer to the stored file
    if offset:
        headers["Range"] = f"bytes={offset}-"

    written = offset
    try:
        with httpx.Client(follow_redirects=True, timeout=timeout_s, transport=transport) as client:
            with client.stream("GET", url, headers=headers) as resp:
                if resp.status_code == 416 and offset:
                    total = _total_from_content_range(resp.headers.get("content-range"))
                    if total == offset:  # the part file already holds everything
                        _hash_file(part, hashers)
                        return _finish(part, dest, hashers, sha256, md5, offset, offset)
                    raise UserError(
                        f"{url}: server refused to resume at byte {offset:,}; "
                        f"delete {part} and run again"
                    )
                if resp.status_code >= 400:
                    raise UserError(f"download of {url} failed: HTTP {resp.status_code}")
                if resp.status_code == 206:
                    start = _start_from_content_range(resp.headers.get("content-range"))
                    if start != offset:
                        raise UserError(
                            f"{url}: server resumed at byte {start} instead of {offset}; "
                            f"delete {part} and run again"
                        )
                    total = _total_from_content_range(resp.headers.get("content-range"))
                    _hash_file(part, hashers)
                    mode = "ab"
                    log.info("resuming %s at %s bytes", url, f"{offset:,}")
                else:  # 200: full body, the server ignored or we sent no Range
                    if offset:
                        log.info("server does not support resume; restarting %s", url)
                    offset = written = 0
                    length = resp.headers.get("content-length")
                    total = int(length) if length and length.isdigit() else None
                    mode = "wb"
                with (
                    part.open(mode) as out,
                    tqdm(
                        total=total,
                        initial=offset,
                        unit="B",
                        unit_scale=True,
                        unit_divisor=1024,
                        desc=dest.name,
                        disable=not show_progress,
                    ) as bar,
                ):
                    for chunk in resp.iter_bytes(chunk_size):
                        out.write(chunk)
                        for h in hashers.values():
                            h.update(chunk)
                        written += len(chunk)
                        bar.update(len(chunk))
    except httpx.HTTPError as exc:
        raise UserError(
            f"download of {url} interrupted after {written:,} bytes ({exc or type(exc).__name__}); "
            f"run the same command again to resume from {part}"
        ) from exc
    except OSError as exc:
        raise UserError(f"cannot write {part}: {exc}") from exc

    if total is not None and written != total:
        raise UserError(
            f"download of {url} stopped at {written:,} of {total:,} bytes; "
            f"run the same command again to resume from {part}"
        )
    return _finish(part, dest, hashers, sha256, md5, written, offset)


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    _hash_file(path, {"sha256": h})
    return h.hexdigest()


def _finish(
    part: Path,
    dest: Path,
    hashers: dict[str, hashlib._Hash],
    sha256: str | None,
    md5: str | None,
    size: int,
    resumed_from: int,
) -> DownloadResult:
    got = {name: h.hexdigest() for name, h in hashers.items()}
    for name, want in (("sha256", sha256), ("md5", md5)):
        if want and got[name] != want:
            part.unlink(missing_ok=True)
            raise UserError(
                f"checksum mismatch for {dest.name}: expected {name} {want}, got {got[name]}; "
                f"the download was deleted, run again to fetch it anew"
            )
    part.replace(dest)
    verified = "sha256" if sha256 else ("md5" if md5 else None)
    return DownloadResult(dest, size, got["sha256"], resumed_from, verified)


def _verify_existing(dest: Path, sha256: str | None, md5: str | None) -> DownloadResult:
    hashers = {"sha256": hashlib.sha256()}
    if md5:
        hashers["md5"] = hashlib.md5()
    _hash_file(dest, hashers)
    got = {name: h.hexdigest() for name, h in hashers.items()}
    for name, want in (("sha256", sha256), ("md5", md5)):
        if want and got[name] != want:
            raise UserError(
                f"{dest} exists but its {name} is {got[name]}, expected {want}; "
                f"use --force to download it again"
            )
    verified = "sha256" if sha256 else ("md5" if md5 else None)
    return DownloadResult(dest, dest.stat().st_size, got["sha256"], 0, verified, True)


def _hash_file(path: Path, hashers: dict[str, hashlib._Hash]) -> None:
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            for h in hashers.values():
                h.update(block)


def _check_hex(name: str, value: str | None, length: int) -> str | None:
    if value is None:
        return None
    value = value.strip().lower()
    if not re.fullmatch(rf"[0-9a-f]{{{length}}}", value):
        raise UserError(f"--{name} must be {length} hex digits, got {value!r}")
    return value


_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)")


def _start_from_content_range(header: str | None) -> int | None:
    m = _CONTENT_RANGE.match(header or "")
    return int(m.group(1)) if m and m.group(1) else None


def _total_from_content_range(header: str | None) -> int | None:
    m = _CONTENT_RANGE.match(header or "")
    return int(m.group(2)) if m and m.group(2) != "*" else None
