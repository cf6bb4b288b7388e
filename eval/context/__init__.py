"""CRUX: controlled evaluation of retrieval contexts by sub-question answerability (issue 19).

A retrieval context is judged by what it lets a reader answer, not by how
relevant its passages look: every passage of a question's pool is graded 0-5
against each of the question's sub-questions (the answerability matrix), and
coverage, ranked coverage (alpha-nDCG) and density follow from that matrix
(:mod:`eval.context.metrics`). The final answer is graded with the same rubric,
so context quality can be related to answer coverage (Kendall tau).
"""
