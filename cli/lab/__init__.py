"""The research lab's commands: evaluation, training and dataset building.

They import ``eval`` and ``training``, which the runtime (a wheel without the lab, the GPU
image) does not ship, so :mod:`cli.main` registers them only where the lab is installed.
:data:`cli.main.LAB_COMMANDS` names them, for the message a runtime-only install gives.
"""

from __future__ import annotations

import argparse

from cli.lab import classifier, conversations, evaluation, indexes, qtree
from eval.settings import LabSettings

__all__ = ["LabSettings", "register"]


def register(groups: dict[str | None, argparse._SubParsersAction]) -> None:
    """Add the lab's commands: new top-level ones, and actions of the runtime's groups."""
    top = groups[None]
    evaluation.register(top)  # eval label/run/report/... (cli.lab.evaluation)
    qtree.register(top)  # qtree build/summary/train
    conversations.register(top)  # conversations build/eval
    indexes.register(groups["index"])  # index eval/paired/judge/adapt
    classifier.register(groups["classifier"])  # classifier train/eval
