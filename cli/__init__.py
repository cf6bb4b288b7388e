"""The ``typed-rag`` command line: the one place that may import every area.

The library packages (``typed_rag``, ``indexes``, ``serving``, ``eval``, ``ui``)
never import this package; :mod:`cli.main` wires their commands together.
"""
