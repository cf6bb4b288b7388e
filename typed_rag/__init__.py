"""Typed-RAG: type-aware decomposition of non-factoid questions for RAG.

Imports sit at module top, with one exception: an optional heavy dependency
(torch, transformers, sentence_transformers, safetensors, huggingface_hub, llama_cpp, vllm,
openai, FlagEmbedding, gradio, ray) is imported inside the function that first
needs it, marked ``# heavy: <package>``. A module that needs one at import time
(a ``torch.nn.Module`` subclass, gradio's UI) counts as heavy itself and is
imported the same way by whoever picks it: a factory such as
``typed_rag.classifier.build_classifier`` or ``typed_rag.engines.build_engine``,
or the command that uses it. So importing the package, the server or the CLI
never loads a backend that the settings did not choose.
"""

from __future__ import annotations

__version__ = "0.1.0"
