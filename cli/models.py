"""``typed-rag models pull|list``: fetch and inspect the models the engines and embedders use."""

from __future__ import annotations

import argparse

from typed_rag.config import Settings
from typed_rag.models import MODELS, ensure_model, get_spec, model_path
from typed_rag.models.integrity import is_stamped


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``models`` command group."""
    models = sub.add_parser("models", help="download, verify and list models")
    msub = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")

    p_pull = msub.add_parser("pull", help="fetch a registry model and check its sha256")
    p_pull.add_argument("name", help="registry name or alias (see `typed-rag models list`)")
    p_pull.add_argument(
        "--format",
        choices=("gguf", "hf"),
        default=None,
        help="hf: also convert a GGUF to a bf16 safetensors folder (for vLLM)",
    )
    p_pull.add_argument(
        "--force", action="store_true", help="fetch again even if a verified copy exists"
    )
    p_pull.set_defaults(func=_pull)

    p_list = msub.add_parser("list", help="registry models and whether they are present")
    p_list.set_defaults(func=_list)


def _pull(args: argparse.Namespace, settings: Settings) -> int:
    spec = get_spec(args.name)
    path = ensure_model(settings, spec.name, fmt=args.format or "native", force=args.force)
    print(path)
    return 0


def _list(args: argparse.Namespace, settings: Settings) -> int:
    rows = [("NAME", "KIND", "SIZE", "STATUS", "LICENCE", "ALIASES")]
    for spec in MODELS:
        path = model_path(settings, spec)
        checked = path / spec.checked_file if spec.checked_file else path
        if not path.exists():
            status = "-"
        elif checked.exists() and is_stamped(path, checked, spec.sha256):
            status = "verified"
        else:
            status = "present (unverified)"
        rows.append(
            (
                spec.name,
                spec.kind,
                f"{spec.size / 1e6:,.0f} MB",
                status,
                spec.license,
                ", ".join(spec.aliases),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(f"\nmodels folder: {settings.models_dir}")
    return 0
