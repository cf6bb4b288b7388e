"""Errors a user can cause. The CLI and server turn them into a clear message, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from a user (file, flag, request). The message names the thing at fault."""
