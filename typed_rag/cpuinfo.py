"""What this CPU is and can do, from ``/proc/cpuinfo`` (Linux; empty answers elsewhere).

Kernel choices read it: the e5 engine's compile flags, whether bfloat16 is native, the
key under which the dense encoder's measured dtype choice is cached, and the threads
llama.cpp runs with where ``engine.n_threads`` is unset (:mod:`typed_rag.config_resolve`).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpuinfo_field(name: str) -> str:
    """The value of the first ``name : value`` line ('' where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return ""


def cpu_flags() -> set[str]:
    """The CPU's feature flags (``avx2``, ``avx512_bf16``, ...)."""
    return set(cpuinfo_field("flags").split())


def cpu_name() -> str:
    """The CPU model name, or the platform's processor or machine name."""
    return cpuinfo_field("model name") or platform.processor() or platform.machine()


def llama_threads() -> int:
    """Physical cores, as llama.cpp assumes (logical CPUs halved when there are several).

    More threads than free cores makes llama.cpp much slower, not faster: its
    threads spin at barriers while others are descheduled.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1
    return max(1, cpus // 2) if cpus > 2 else cpus
