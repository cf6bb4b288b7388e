"""Does an answer cover the sub-questions its question needs? (the project's own judge)"""
