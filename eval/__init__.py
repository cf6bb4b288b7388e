"""Wiki-NFQA evaluation: the loader, LINKAGE scoring, resumable runs, reports and coverage.

Request path of a run: ``wikinfqa`` (validated questions) -> ``labels`` (types)
-> ``selection`` (limit / stratified sample) -> ``runner`` (answers, then
``linkage`` scores, then optional ``coverage``, all appended to JSONL by
``store``) -> ``report`` (``metrics`` tables and the ``figures`` PNG).
"""
