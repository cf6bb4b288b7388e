"""Offline training and dataset building: the type classifier, QTREE / QPlanner, conversation sets.

Never imported by the runtime (:mod:`typed_rag`), the server or the demo.
"""
