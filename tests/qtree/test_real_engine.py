"""QTREE's schemas on the real llama.cpp engine (a tiny model): the replies follow them.

The fake engine never compiles a schema, so only a real engine shows that one
cannot be turned into a grammar (a ``\\d`` in an outline pattern once made every
outline request of `qtree build` fail on llama.cpp).
"""

from __future__ import annotations

import json

import pytest

from eval.settings import load_lab_settings
from tests.qtree.helpers import tree_dict
from typed_rag.engines.base import ChatRequest
from typed_rag.models import ensure_model
from typed_rag.qtree.outlines import outline_schema
from typed_rag.qtree.prompts import outline_messages
from typed_rag.qtree.tree import parse_tree

pytestmark = pytest.mark.slow


async def test_outline_replies_name_only_the_trees_nodes() -> None:
    pytest.importorskip("llama_cpp")
    from typed_rag.engines.llamacpp import LlamaCppEngine

    tree = parse_tree(json.dumps(tree_dict()), "Tell me about tea.")
    engine = LlamaCppEngine(
        ensure_model(load_lab_settings(), "smollm2-135m-instruct-q4_1"), n_ctx=2048, n_threads=1
    )
    await engine.start()
    try:
        (res,) = await engine.generate(
            [
                ChatRequest(
                    messages=outline_messages(
                        tree, "Tell me about tea, but skip 1.2.", "1.2", "exclude"
                    ),
                    temperature=1.0,
                    max_tokens=160,
                    seed=7,
                    json_schema=outline_schema(node_ids=list(tree)),
                )
            ]
        )
    finally:
        await engine.close()
    outlines = json.loads(res.text)["outlines"]
    assert len(outlines) == 3
    assert all(4 <= len(o) <= 6 and set(o) <= set(tree.nodes) for o in outlines)
