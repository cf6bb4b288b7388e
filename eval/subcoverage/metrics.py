"""Metrics #1-#6, the four answered/retrieved scenarios and the weighted rating (Xie et al. 3.2, 4).

The paper's scenarios and Metrics #1-#6 pool every sub-question of a type over
all questions, so they are ratios of sums. Each answer's judgements are
therefore reduced to additive counts (:func:`counts`); a statistic is a
function of summed counts, and its interval is a cluster bootstrap that
resamples questions (a question's sub-questions stay together). The weighted
rating is a per-answer mean, ``sum_t w_t * c_t`` over the answer's per-type
coverage rates ``c_t``, with ``w = 1 : 0.5 : -1``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from eval.reports.linkage_metrics import Estimate
from eval.subcoverage.decompose import KINDS

WEIGHTS: dict[str, float] = {"core": 1.0, "background": 0.5, "follow_up": -1.0}
SCENARIOS: tuple[str, ...] = (
    "not_answered_not_retrieved",
    "not_answered_retrieved",
    "answered_not_retrieved",
    "answered_retrieved",
)

Counts = dict[str, float]
Stat = Callable[[Mapping[str, np.ndarray]], np.ndarray]


@dataclass
class AnswerCells:
    """One answer's judgements: per sub-question its kind, whether the answer covers it,
    how many of the ``n_chunks`` retrieved chunks cover it, and its addressing position."""

    kinds: list[str]
    answered: list[bool]
    chunk_hits: list[int]
    n_chunks: int
    positions: list[float | None]


def counts(cells: AnswerCells) -> Counts:
    """Additive counts: per kind ``n``, ``a`` (answered), ``r`` (retrieved by any chunk),
    ``ar`` (both), position sums; for core sub-questions, the share of chunks covering
    each, summed separately for those the answer covers (``pc``) and does not (``pn``)."""
    out: Counts = {}
    for kind in KINDS:
        for key in ("n", "a", "r", "ar", "pos_sum", "pos_n"):
            out[f"{key}_{kind}"] = 0.0
    for key in ("pc_sum", "pc_n", "pn_sum", "pn_n"):
        out[key] = 0.0
    for kind, ans, hits, pos in zip(
        cells.kinds, cells.answered, cells.chunk_hits, cells.positions, strict=True
    ):
        ret = hits > 0
        out[f"n_{kind}"] += 1
        out[f"a_{kind}"] += ans
        out[f"r_{kind}"] += ret
        out[f"ar_{kind}"] += ans and ret
        if ans and pos is not None:
            out[f"pos_sum_{kind}"] += pos
            out[f"pos_n_{kind}"] += 1
        if kind == "core" and cells.n_chunks > 0:
            side = "pc" if ans else "pn"
            out[f"{side}_sum"] += hits / cells.n_chunks
            out[f"{side}_n"] += 1
    return out


def ratio(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """a / b elementwise, nan where b is 0."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), np.nan)


def scenario(kind: str, which: str) -> Stat:
    """P_type(answered?, retrieved?): the share of the type's sub-questions in one scenario."""

    def stat(s: Mapping[str, np.ndarray]) -> np.ndarray:
        n, a, r, ar = (s[f"{k}_{kind}"] for k in ("n", "a", "r", "ar"))
        part = {
            "not_answered_not_retrieved": n - a - r + ar,
            "not_answered_retrieved": r - ar,
            "answered_not_retrieved": a - ar,
            "answered_retrieved": ar,
        }[which]
        return ratio(part, n)

    return stat


def metric1(kind: str) -> Stat:
    """#1 P_type(answered): the answer's coverage rate of the type."""
    return lambda s: ratio(s[f"a_{kind}"], s[f"n_{kind}"])


def metric2(kind: str) -> Stat:
    """#2 P_type(retrieved): the share of the type covered by at least one chunk."""
    return lambda s: ratio(s[f"r_{kind}"], s[f"n_{kind}"])


def metric3(s: Mapping[str, np.ndarray]) -> np.ndarray:
    """#3 P_core(answered, retrieved) / P_core(retrieved): retrieved core knowledge used."""
    return ratio(s["ar_core"], s["r_core"])


def metric4(s: Mapping[str, np.ndarray]) -> np.ndarray:
    """#4 P_core(not answered, not retrieved) / P_core(not answered): missed core points
    that better retrieval could supply."""
    missed = s["n_core"] - s["a_core"]
    return ratio(missed - s["r_core"] + s["ar_core"], missed)


def p_covered(s: Mapping[str, np.ndarray]) -> np.ndarray:
    return ratio(s["pc_sum"], s["pc_n"])


def p_not_covered(s: Mapping[str, np.ndarray]) -> np.ndarray:
    return ratio(s["pn_sum"], s["pn_n"])


def metric5(s: Mapping[str, np.ndarray]) -> np.ndarray:
    """#5 p_covered - p_not_covered: the mean share of chunks holding a core sub-question's
    answer when the answer covers it, minus that when it does not."""
    return p_covered(s) - p_not_covered(s)


def position(kind: str) -> Stat:
    """pos_type: the mean addressing position of the type's covered, located sub-questions."""
    return lambda s: ratio(s[f"pos_sum_{kind}"], s[f"pos_n_{kind}"])


def metric6(s: Mapping[str, np.ndarray]) -> np.ndarray:
    """#6 pos_follow-up - (pos_core + pos_background) / 2: positive when the answer puts
    follow-up material after core and background material."""
    return position("follow_up")(s) - (position("core")(s) + position("background")(s)) / 2


def coverage_rates(cells: AnswerCells) -> dict[str, float | None]:
    """c_type of one answer: its covered share of the type's sub-questions (None if none)."""
    out: dict[str, float | None] = {}
    for kind in KINDS:
        flags = [a for k, a in zip(cells.kinds, cells.answered, strict=True) if k == kind]
        out[kind] = sum(flags) / len(flags) if flags else None
    return out


def rating(rates: Mapping[str, float | None]) -> float:
    """sum_t w_t * c_t; a type without sub-questions adds nothing."""
    return sum(WEIGHTS[k] * (rates.get(k) or 0.0) for k in KINDS)


def cluster_bootstrap(
    rows: Sequence[Counts], stat: Stat, n_boot: int = 1000, seed: int = 42, level: float = 0.95
) -> Estimate | None:
    """``stat`` of the summed counts, with a percentile interval from resampling the rows
    (questions); None when the statistic is undefined on all the data."""
    if not rows:
        return None
    keys = sorted({k for r in rows for k in r})
    mat = np.array([[r.get(k, 0.0) for k in keys] for r in rows], dtype=float)
    point = float(stat(dict(zip(keys, mat.sum(axis=0), strict=True))))
    if np.isnan(point):
        return None
    if len(rows) == 1 or n_boot <= 0:
        return Estimate(point, point, point, len(rows))
    rng = np.random.default_rng(seed)
    values = np.empty(n_boot)
    step = max(1, 2_000_000 // (mat.shape[0] * mat.shape[1]))
    for start in range(0, n_boot, step):
        stop = min(n_boot, start + step)
        idx = rng.integers(0, len(rows), size=(stop - start, len(rows)))
        sums = mat[idx].sum(axis=1)
        values[start:stop] = stat({k: sums[:, j] for j, k in enumerate(keys)})
    alpha = (1.0 - level) / 2.0
    low, high = np.nanquantile(values, [alpha, 1.0 - alpha])
    return Estimate(point, float(low), float(high), len(rows))


@dataclass(frozen=True)
class WinRate:
    """How often ``a``'s rating beats, loses to and ties with ``b``'s on the same question."""

    a: str
    b: str
    diffs: tuple[float, ...]  # a's rating minus b's, per question both answered
    tolerance: float = 1e-9  # differences within it tie

    @property
    def wins(self) -> int:
        return sum(d > self.tolerance for d in self.diffs)

    @property
    def losses(self) -> int:
        return sum(d < -self.tolerance for d in self.diffs)

    @property
    def ties(self) -> int:
        return sum(abs(d) <= self.tolerance for d in self.diffs)

    @property
    def n(self) -> int:
        return len(self.diffs)

    def to_dict(self) -> dict[str, float | int | str]:
        n = self.n
        return {
            "a": self.a,
            "b": self.b,
            "n": n,
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "win_rate": self.wins / n if n else float("nan"),
            "loss_rate": self.losses / n if n else float("nan"),
            "tie_rate": self.ties / n if n else float("nan"),
        }


def win_rates(ratings: Mapping[str, Mapping[str, float]], tolerance: float = 1e-9) -> list[WinRate]:
    """Every pair of methods (in the mapping's order), compared on the questions both
    answered; ratings within ``tolerance`` tie."""
    methods = list(ratings)
    out = []
    for i, a in enumerate(methods):
        for b in methods[i + 1 :]:
            diffs = tuple(ratings[a][q] - ratings[b][q] for q in ratings[a] if q in ratings[b])
            out.append(WinRate(a, b, diffs, tolerance))
    return out
