"""sha256 checks of model files, remembered in a stamp so a big file is hashed once.

The stamp records the size and modification time the file had when it was
hashed; if either changes, the file is hashed again. A file that does not hash
to the pinned value is never loaded and never deleted: the user decides.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from typed_rag.errors import UserError

log = logging.getLogger(__name__)

STAMP_SUFFIX = ".verified.json"


class ModelIntegrityError(UserError):
    """A model file does not hash to the value the registry pins."""


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def stamp_path(target: Path) -> Path:
    """Where the verification stamp of a model file or folder lives (beside it)."""
    return target.with_name(target.name + STAMP_SUFFIX)


def _fingerprint(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def is_stamped(target: Path, checked: Path, sha256: str) -> bool:
    """True when the stamp says ``checked`` hashed to ``sha256`` and it has not changed since."""
    stamp = stamp_path(target)
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return (
        data.get("sha256") == sha256
        and data.get("file") == checked.name
        and data.get("fingerprint") == _fingerprint(checked)
    )


def write_stamp(target: Path, checked: Path, sha256: str) -> None:
    """Remember that ``checked`` (inside or equal to ``target``) hashed to ``sha256``."""
    payload = {"sha256": sha256, "file": checked.name, "fingerprint": _fingerprint(checked)}
    stamp = stamp_path(target)
    tmp = stamp.with_name(stamp.name + ".tmp")
    tmp.write_text(json.dumps(payload))
    tmp.replace(stamp)


def verify(
    target: Path, checked: Path, sha256: str, size: int | None, what: str, *, stamp: bool = True
) -> None:
    """Check ``checked`` against the pinned hash (using the stamp when valid).

    Raises :class:`ModelIntegrityError` naming the file and both hashes; the
    file is left in place.
    """
    if stamp and is_stamped(target, checked, sha256):
        return
    if not checked.is_file():
        raise ModelIntegrityError(f"{checked}: missing; {what} is incomplete")
    actual_size = checked.stat().st_size
    if size and actual_size != size:
        raise ModelIntegrityError(
            f"{checked}: size {actual_size:,} bytes, but {what} must be {size:,} bytes; "
            "the file is truncated or not this model"
        )
    log.info("verifying sha256 of %s", checked)
    actual = sha256_file(checked)
    if actual != sha256:
        raise ModelIntegrityError(
            f"{checked}: sha256 {actual} does not match {sha256} pinned for {what}; "
            "the file is corrupt or not this model (it was not loaded and not deleted)"
        )
    if stamp:
        write_stamp(target, checked, sha256)
