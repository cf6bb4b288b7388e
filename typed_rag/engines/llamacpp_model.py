"""What the llama.cpp engine asks of its ``Llama`` object, on the worker thread that owns it.

Loading a GGUF with the chat template stored in it (a model without one is refused:
instruct models are called through their template, never with raw text) and the hook
that lets a cancelled request abort llama_decode; templating and tokenizing a prompt;
and the log-probabilities of one-token choices after a prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from typed_rag.engines.base import EngineError


def load_gguf(model_path: Path, *, n_ctx: int, n_threads: int, n_batch: int) -> tuple[Any, Any]:
    """The ``Llama`` model and the Jinja formatter of the chat template stored in the GGUF."""
    from llama_cpp import Llama  # heavy: llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # heavy: llama_cpp

    llm = Llama(
        model_path=str(model_path),
        n_ctx=n_ctx,
        n_threads=n_threads,
        n_threads_batch=n_threads,
        n_batch=n_batch,
        verbose=False,
    )
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        llm.close()
        raise EngineError(
            f"{model_path} has no chat template in its metadata; use an instruct model"
        )
    eos_id, bos_id = llm.token_eos(), llm.token_bos()
    vocab = llm._model  # the text of special tokens is only exposed here
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=vocab.token_get_text(eos_id) if eos_id != -1 else "",
        bos_token=vocab.token_get_text(bos_id) if bos_id != -1 else "",
        stop_token_ids=[eos_id],
    )
    return llm, formatter


def install_abort(llm: Any, should_abort: Callable[[], bool]) -> Any:
    """Let a cancelled request stop llama_decode itself (prompt processing included).

    The stopping criterion only runs between sampled tokens; a long prompt
    is one llama_decode call per batch, which this callback interrupts. Returns the
    ctypes callback, which the caller must keep alive as long as the model.
    """
    import llama_cpp  # heavy: llama_cpp

    callback = llama_cpp.ggml_abort_callback(lambda _data: should_abort())
    llama_cpp.llama_set_abort_callback(llm._ctx.ctx, callback, None)
    return callback


def prompt_tokens(
    llm: Any, formatter: Any, messages: list[dict[str, str]]
) -> tuple[list[int], list[str], Any]:
    """Token ids of the templated prompt, the template's stop strings and criteria."""
    formatted = formatter(messages=messages)
    ids = llm.tokenize(
        formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
    )
    stop = formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]
    return ids, [s for s in stop if s], formatted.stopping_criteria


def choice_token_ids(llm: Any, choices: Sequence[str]) -> dict[str, int]:
    """The token id of each choice; a choice that is not exactly one token is refused."""
    ids = {}
    for choice in choices:
        toks = llm.tokenize(choice.encode("utf-8"), add_bos=False, special=False)
        if len(toks) != 1:
            raise EngineError(f"choice {choice!r} is {len(toks)} tokens; choices must be one")
        ids[choice] = toks[0]
    return ids


def last_logits(llm: Any) -> np.ndarray:
    """A float64 copy of the logits of the last evaluated token.

    Without logits_all, llama.cpp keeps the logits of each batch's last token only.
    """
    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
    return logits.astype(np.float64)


def choice_logprobs(logits: np.ndarray, choice_ids: dict[str, int]) -> dict[str, float]:
    """Log-softmax of ``logits`` at each choice's token."""
    top = logits.max()
    log_z = top + np.log(np.exp(logits - top).sum())
    return {c: float(logits[t] - log_z) for c, t in choice_ids.items()}
