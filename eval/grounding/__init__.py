"""Faithfulness of answers to the passages they show: judge-free checks first
(:mod:`typed_rag.finishing.code_spans`), beside the support judge of :mod:`eval.citation_support`."""
