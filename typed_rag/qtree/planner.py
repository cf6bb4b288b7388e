"""QPlanner: a model that writes the outline for a conditioned question directly (sec. 3.5).

Its reply is a sub-query tree (the paper's intermediate reasoning) and then,
after a line ``Outline:``, the chosen numbered sub-queries. Two planners
share that prompt and parser:

- :class:`EnginePlanner`: any project engine, either the base model prompted
  (the baseline) or a trained planner served by vLLM / llama.cpp;
- :class:`HFPlanner`: a trained planner folder loaded with transformers in
  process (what the slow test and a quick GPU check use).

``load_planner("prompt", engine)`` or ``load_planner(path)`` picks one.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from typed_rag.engines.base import ChatRequest, Engine
from typed_rag.qtree.outlines import OUTLINE_SIZE
from typed_rag.qtree.prompts import planner_messages
from typed_rag.qtree.tree import TreeError, node_sort_key

OUTLINE_MARK = "Outline:"
META = "planner.json"
# Markup a small model wraps items in, and the numbering in front of them ("1.", "- 1.1.",
# "1. 1.1." when it numbers the outline and keeps the node ids too).
_MARKUP = re.compile(r"\*\*|__|`")
_LEAD = re.compile(r"^\s*(?:[-*+]\s+|(?:\d+(?:\.\d+)*[.)]?(?:\s+|$)))+")
# Several numbered items run together on one line: "Where? 2. When? 3. How?".
_RUN_ON = re.compile(r"(?<=[?.!])\s+(?=\d+(?:\.\d+)*[.)]\s)")


def format_target(tree: dict[str, str], outline: Sequence[str], with_tree: bool = True) -> str:
    """The planner's training reply: numbered tree lines, ``Outline:``, numbered outline lines."""
    lines = []
    if with_tree:
        for node_id in sorted(tree, key=node_sort_key):
            lines.append(f"{node_id}. {tree[node_id]}")
    lines.append(OUTLINE_MARK)
    lines.extend(outline)
    return "\n".join(lines)


def parse_planner_output(text: str, size: int = OUTLINE_SIZE) -> list[str]:
    """The outline's sub-queries (numbering and markup removed), at most ``size``.

    :class:`TreeError` if none. One query per line, or several numbered ones run
    together on a line, which the prompted 1.5B planner writes.
    """
    cut = text.rfind(OUTLINE_MARK)
    if cut < 0:
        raise TreeError("planner reply has no outline")
    out: list[str] = []
    for line in text[cut + len(OUTLINE_MARK) :].splitlines():
        for item in _RUN_ON.split(_MARKUP.sub("", line)):
            query = _LEAD.sub("", item).strip()
            if query and query not in out:
                out.append(query)
    if not out:
        raise TreeError("planner outline is empty")
    return out[:size]


class Planner(Protocol):
    """Writes the outline (sub-queries, most general first) for a conditioned question."""

    async def plan(self, conditioned: str) -> list[str]: ...


class EnginePlanner:
    """The planner prompt on a project engine; unparseable replies are resampled."""

    def __init__(
        self,
        engine: Engine,
        with_tree: bool = True,
        max_tokens: int = 2048,
        temperature: float = 0.0,
        seed: int = 42,
        retries: int = 1,
    ) -> None:
        self.engine = engine
        self.with_tree = with_tree
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.retries = retries

    async def plan(self, conditioned: str) -> list[str]:
        error = TreeError("no attempt")
        for attempt in range(1 + self.retries):
            req = ChatRequest(
                messages=planner_messages(conditioned, self.with_tree),
                temperature=self.temperature if attempt == 0 else max(self.temperature, 0.7),
                max_tokens=self.max_tokens,
                seed=self.seed + attempt,
            )
            (res,) = await self.engine.generate([req])
            try:
                return parse_planner_output(res.text)
            except TreeError as exc:
                error = exc
        raise error


class HFPlanner:
    """A trained planner folder run in process with transformers (greedy decoding)."""

    def __init__(self, path: Path, max_new_tokens: int | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.path = Path(path)
        meta = read_meta(self.path)
        self.with_tree = bool(meta.get("with_tree", True))
        self.max_new_tokens = max_new_tokens or int(meta.get("max_new_tokens", 1024))
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = AutoModelForCausalLM.from_pretrained(str(self.path)).to(device).eval()
        self._lock = asyncio.Lock()  # one generation at a time on the one model

    def generate(self, conditioned: str) -> str:
        import torch

        ids = self.tokenizer.apply_chat_template(
            planner_messages(conditioned, self.with_tree),
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        ).to(self.model.device)
        with torch.no_grad():
            out = self.model.generate(
                **ids,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return str(
            self.tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
        )

    def reply_logprob(self, conditioned: str, reply: str) -> float:
        """Mean log-probability per token of ``reply`` as this planner's answer: how much it
        prefers an outline (trained vs base, chosen vs rejected) without decoding one."""
        import torch  # heavy: torch

        messages = planner_messages(conditioned, self.with_tree)
        prompt = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True
        )["input_ids"]
        full = self.tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": reply}], return_dict=True
        )["input_ids"]
        ids = torch.tensor([list(full)], device=self.model.device)
        with torch.no_grad():
            logits = self.model(input_ids=ids).logits[0, :-1]
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        targets = ids[0, 1:]
        start = len(prompt) - 1  # the first reply token is predicted at the prompt's last
        picked = logprobs[start:].gather(1, targets[start:, None])
        return float(picked.mean())

    async def plan(self, conditioned: str) -> list[str]:
        async with self._lock:
            text = await asyncio.to_thread(self.generate, conditioned)
        return parse_planner_output(text)


def read_meta(path: Path) -> dict[str, Any]:
    meta = Path(path) / META
    return json.loads(meta.read_text()) if meta.exists() else {}


@lru_cache(maxsize=2)
def _hf_planner(path: str) -> HFPlanner:
    return HFPlanner(Path(path))


def load_planner(spec: str, engine: Engine | None = None) -> Planner:
    """``"prompt"``: the engine's model prompted; otherwise a trained planner folder (cached)."""
    if spec == "prompt":
        if engine is None:
            raise ValueError("the prompted planner needs an engine")
        return EnginePlanner(engine)
    if not (Path(spec) / "config.json").exists():
        raise FileNotFoundError(f"no trained planner in {spec} (config.json missing)")
    return _hf_planner(str(Path(spec).resolve()))
