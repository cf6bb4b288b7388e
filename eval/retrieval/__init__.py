"""Retrieval evaluation on Wiki-NFQA: answer recall, judged relevance, configuration specs."""
