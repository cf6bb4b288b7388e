"""``GET /v1/config``'s body: the settings in force, resolved, as a client may read them.

Every ``auto`` is already resolved (:func:`typed_rag.config_resolve.resolve_settings`); here
what a client must not learn is taken out: keys and tokens read ``<redacted>`` (an unset
one stays null, so a client can tell whether a key is set), a URL's user and password
likewise, and paths of the server's disk read as ``/health``'s errors do (under the home as
``<home>/...``, any other absolute path as ``<path>/`` and its last part).
"""

from __future__ import annotations

import re
from typing import Any

from serving.paths import PathScrubber, hide_paths
from typed_rag.config import Settings

REDACTED = "<redacted>"
# Settings whose value is a credential, by the last part of their name.
_SECRET = re.compile(r"(api_key|token|secret|password)$")
_URL_USER = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@\s]+@", re.IGNORECASE)


def public_settings(settings: Settings, home: PathScrubber) -> dict[str, Any]:
    """``settings`` as JSON without secrets or server paths; ``home``: the scrubber that
    shows the server's home as ``<home>``."""
    return _walk(settings.model_dump(mode="json"), home, "")


def _walk(value: Any, home: PathScrubber, name: str) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, home, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, home, name) for v in value]
    if not isinstance(value, str):
        return value
    if _SECRET.search(name):
        return REDACTED
    return hide_paths(home.text(_URL_USER.sub(rf"\g<1>{REDACTED}@", value)))
