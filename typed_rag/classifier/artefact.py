"""Reading and writing a trained classifier's one-file artefact (safetensors + JSON metadata).

The embedding head and the fine-tuned encoder store their weights the same way:
tensors in a safetensors file whose metadata holds a ``format`` tag and the
artefact's metadata as JSON. safetensors comes with the torch extra, so it is
imported where it is used (the heavy-dependency rule in :mod:`typed_rag`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typed_rag.errors import UserError
from typed_rag.types import LABELS


def write_artefact(path: Path, tensors: dict[str, Any], fmt: str, meta: dict[str, Any]) -> None:
    """Write tensors and metadata atomically (temp name, then rename)."""
    from safetensors.torch import save_file  # heavy: safetensors

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    contiguous = {k: v.detach().contiguous() for k, v in tensors.items()}
    save_file(contiguous, str(tmp), metadata={"format": fmt, "meta": json.dumps(meta)})
    tmp.replace(path)


def read_artefact(
    path: Path, fmt: str, foreign: str, *, tensors: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata (and, when asked, the tensors) of an artefact of format ``fmt``.

    An unreadable file, or one of another format (``foreign`` names what was
    expected), is a UserError; so is a label order other than nf-cats'.
    """
    from safetensors import SafetensorError, safe_open  # heavy: safetensors

    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            weights = {k: f.get_tensor(k) for k in f.keys()} if tensors else {}  # noqa: SIM118
    except (SafetensorError, OSError) as exc:
        raise UserError(f"{path}: not a readable classifier artefact ({exc})") from exc
    if metadata.get("format") != fmt:
        raise UserError(f"{path}: not a {foreign} (format {metadata.get('format')!r})")
    meta = json.loads(metadata["meta"])
    labels = meta.get("labels", [t.value for t in LABELS])
    if labels != [t.value for t in LABELS]:
        raise UserError(f"{path}: label order {labels} differs from nf-cats order; retrain")
    return meta, weights
