"""Sub-question coverage as Xie et al. define it ("Do RAG Systems Cover What Matters?", issue 19).

Each question is decomposed once (a comprehensive list of sub-questions, then
each classified core / background / follow-up); the answer and every
retrieved chunk are judged yes/no per sub-question, and a covered answer
cell also gets the fragment that answers it. From these come the four
answered/retrieved scenarios, Metrics #1-#6 and the weighted rating, per
method and question type, and pairwise win rates by rating. Entry point:
:func:`evaluate_subcoverage`; everything judged is cached under its folder.
"""

from eval.subcoverage.evaluate import evaluate_subcoverage

__all__ = ["evaluate_subcoverage"]
