"""Where the distributed evaluation runs: joining a Ray cluster and sizing its actors.

Placement: one actor per GPU (``num_gpus`` = the vLLM tensor-parallel size)
when the generator or the scorer is vLLM and the cluster has GPUs; otherwise
one per ``engine.n_threads`` CPUs (one CPU when unset). ``--ray-workers N``
asks for N actors; more than the cluster can place is an error, not a hang.
Ray itself is an optional extra, imported only when a cluster is joined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from typed_rag.config import Settings
from typed_rag.errors import UserError

LOCAL = "local"  # --ray local: start a Ray instance inside this process


@dataclass(frozen=True)
class WorkerPlan:
    """How many actors, and what each one reserves on the cluster."""

    workers: int
    num_cpus: float
    num_gpus: float

    def describe(self) -> str:
        each = f"{self.num_gpus:g} GPU" if self.num_gpus else f"{self.num_cpus:g} CPU"
        return f"{self.workers} Ray worker(s), {each} each"


def plan_workers(
    settings: Settings,
    scorer_settings: Settings,
    resources: Mapping[str, float],
    requested: int | None = None,
) -> WorkerPlan:
    """Actors for the cluster's ``resources`` (``ray.cluster_resources()``)."""
    if requested is not None and requested < 1:
        raise UserError(f"--ray-workers must be at least 1, got {requested}")
    cpus = float(resources.get("CPU", 0))
    gpus = float(resources.get("GPU", 0))
    engines = [s.engine for s in (settings, scorer_settings)]
    vllm = [e for e in engines if e.backend == "vllm"]
    if vllm and gpus >= 1:
        need = float(max(e.tensor_parallel_size for e in vllm))
        plan_cpus, plan_gpus, have, unit = 1.0, need, gpus, "GPU"
    else:
        need = float(max(e.n_threads or 1 for e in engines))
        plan_cpus, plan_gpus, have, unit = need, 0.0, cpus, "CPU"
    capacity = int(have // need)
    if capacity < 1:
        raise UserError(
            f"the Ray cluster has {have:g} {unit}(s); one evaluation worker needs {need:g}"
        )
    workers = requested or capacity
    if workers > capacity:
        raise UserError(
            f"--ray-workers {workers} needs {workers * need:g} {unit}(s) but the Ray cluster "
            f"has {have:g}; at most {capacity} worker(s) fit"
        )
    return WorkerPlan(workers, plan_cpus, plan_gpus)


def connect(address: str) -> bool:
    """Join (or, for ``local``, start) a Ray cluster; True when this call started Ray."""
    try:
        import ray  # heavy: ray
    except ImportError:
        raise UserError("--ray needs Ray: pip install 'typed-rag[ray]'") from None
    if ray.is_initialized():
        return False
    try:
        if address == LOCAL:
            ray.init(include_dashboard=False)
        else:
            ray.init(address=address)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        raise UserError(f"cannot connect to the Ray cluster at {address!r}: {exc}") from None
    return True
