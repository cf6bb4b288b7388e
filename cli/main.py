"""The ``typed-rag`` command: one entry point, subcommands registered by each area.

Each ``cli`` module in ``COMMAND_MODULES`` defines ``register(subparsers)``, which adds its
subcommands and sets ``func(args, settings) -> int`` on them. The research lab's commands
(:mod:`cli.lab`) join where the lab is installed; a runtime-only install (the wheel without
``eval``/``training``, the GPU image) answers them with how to get it.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from pydantic import ValidationError

from cli import ask, classifier, config_show, indexes, models, serve
from typed_rag.config import Settings, load_settings, parse_overrides
from typed_rag.errors import UserError

COMMAND_MODULES: tuple[ModuleType, ...] = (
    indexes,  # index build/list, retrieve, corpus download
    models,  # models pull/list
    classifier,  # classifier predict
    ask,  # ask
    serve,  # serve, ui
    config_show,  # config show
)
# The lab's commands by the group they join (None: the top level), registered by cli.lab.
LAB_COMMANDS: dict[str | None, tuple[str, ...]] = {
    None: ("eval", "qtree", "conversations"),
    "index": ("eval", "paired", "judge", "adapt"),
    "classifier": ("train", "eval"),
}
LAB_PACKAGES = ("eval", "training")


def lab_installed() -> bool:
    """Whether the research lab's packages can be imported beside the runtime."""
    return all(importlib.util.find_spec(name) is not None for name in LAB_PACKAGES)


def settings_class() -> type[Settings]:
    """The settings the commands get: the lab's (with its ``eval`` section) where it is
    installed, the runtime's otherwise."""
    if not lab_installed():
        return Settings
    from cli.lab import LabSettings

    return LabSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="typed-rag", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="TOML settings file (see README)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set engine.backend=vllm (repeatable)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    groups = {None: sub, **{g: _actions(sub.choices[g]) for g in LAB_COMMANDS if g is not None}}
    if lab_installed():
        from cli import lab

        lab.register(groups)
    else:
        for group, names in LAB_COMMANDS.items():
            for name in names:
                _lab_stub(groups[group], name, group)
    return parser


def _actions(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """The subcommand group of ``parser`` (``index``, ``classifier``)."""
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _lab_stub(group: argparse._SubParsersAction, name: str, parent: str | None) -> None:
    """``name`` on a runtime-only install: any arguments, and an error saying what it needs."""
    command = " ".join(p for p in ("typed-rag", parent, name) if p)
    stub = group.add_parser(name, help="(research lab; not installed)", add_help=False)
    stub.add_argument("rest", nargs=argparse.REMAINDER)

    def needs_lab(args: argparse.Namespace, settings: object) -> int:
        raise UserError(
            f"`{command}` is a research-lab command, and this install has the runtime only "
            f"(no {' or '.join(LAB_PACKAGES)} package); the lab runs from a checkout of the "
            "project, set up with `bash scripts/setup.sh env` there"
        )

    stub.set_defaults(func=needs_lab)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``, also taking the global ``--set``/``--config`` after the subcommand.

    ``typed-rag serve --set k=v`` reads as naturally as ``typed-rag --set k=v serve``;
    a subcommand's own option of the same name (``eval constraints-run --set FILE``)
    keeps precedence, since the subcommand parses its arguments first.
    """
    args, rest = parser.parse_known_args(argv)
    if not rest:
        return args
    late = argparse.ArgumentParser(add_help=False)
    late.add_argument("--set", dest="overrides", action="append", default=[])
    late.add_argument("--config")
    more, unknown = late.parse_known_args(rest)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.overrides = [*args.overrides, *more.overrides]
    if more.config is not None:
        args.config = more.config
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        try:
            settings = load_settings(
                args.config, cls=settings_class(), **parse_overrides(args.overrides)
            )
        except ValidationError as exc:
            raise UserError(f"invalid settings: {_validation_summary(exc)}") from None
        return int(args.func(args, settings) or 0)
    except UserError as exc:
        print(f"typed-rag: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"typed-rag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("typed-rag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: not an error. Silence the flush at exit.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0


def _validation_summary(exc: ValidationError) -> str:
    """One line per bad field, named by its dotted path (e.g. ``engine.backend``)."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "settings"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
