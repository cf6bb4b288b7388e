"""QTREE and QPlanner (Jeong et al.) at answer time: outlines for coverage-conditioned questions.

- ``tree``: a question's sub-queries as a fixed-width, three-level tree;
- ``coverage``: coverage instructions from one node of the tree and one intent;
- ``outlines``: candidate outlines, connected sets of tree nodes, parsed and checked;
- ``planner``: QPlanner, prompted or trained, behind one interface;
- ``answering``: outline-guided answering (the option ``constraints.outline``).

Building the QTREE dataset and training QPlanner live in :mod:`training.qtree`.
"""

from __future__ import annotations

from typed_rag.qtree.outlines import Outline, check_outline, is_connected, parse_outlines, trim
from typed_rag.qtree.planner import EnginePlanner, HFPlanner, Planner, load_planner
from typed_rag.qtree.tree import QTree, TreeError, parse_tree

__all__ = [
    "EnginePlanner",
    "HFPlanner",
    "Outline",
    "Planner",
    "QTree",
    "TreeError",
    "check_outline",
    "is_connected",
    "load_planner",
    "parse_outlines",
    "parse_tree",
    "trim",
]
