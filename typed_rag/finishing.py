"""The answer's last step: its citations checked against the passages it was shown,
cleaned up as ``method.*`` says, and the run's total time recorded."""

from __future__ import annotations

import time

from typed_rag.citations import attach_citations, check_citations, strip_invalid
from typed_rag.pipelines import Context
from typed_rag.result import Result


def finish(ctx: Context, start: float, streamed: bool = False) -> Result:
    """Check the answer's citations against the shown passages, then close the timings.

    Invalid numbers are recorded; with ``method.strip_invalid_citations`` a
    typed-rag answer also loses them, and with ``method.post_cite`` its uncited
    sentences get the passage that shares their words and citations whose passage
    shares too few are dropped (not a streamed answer: it is already sent).
    """
    result = ctx.result
    shown = {p.citation for p in result.passages}
    check = check_citations(result.answer, shown)
    result.invalid_citations = check.invalid
    opts = ctx.settings.method.options()
    if result.mode == "typed-rag" and not streamed:
        if check.invalid and opts.strip_invalid_citations:
            result.answer = strip_invalid(result.answer, shown).strip()
        if opts.post_cite:
            recited = attach_citations(result.answer, result.passages, opts.cite_min_share)
            result.answer = recited.answer
            result.added_citations, result.dropped_citations = recited.added, recited.dropped
    result.citations = check_citations(result.answer, shown).valid
    result.timings["total"] = time.perf_counter() - start
    return result
