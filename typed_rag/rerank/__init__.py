"""Rerankers: the BGE cross-encoder (GPU default) and a bi-encoder (CPU default)."""
