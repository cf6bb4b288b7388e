"""Judges: LINKAGE (text and probability verdicts), judging protocols and their measured validity."""
