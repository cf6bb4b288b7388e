"""Resumable evaluation runs: answering and scoring in batches, manifests, distribution, splicing."""
