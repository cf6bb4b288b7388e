"""The settings stay few and documented: ``typed-rag config show`` lists at most 100, each
with a description, and ``docs/settings.md`` is its generated table."""

from __future__ import annotations

from cli.config_show import markdown, setting_rows
from typed_rag.config import REPO_ROOT, Settings

MAX_SETTINGS = 100


def test_at_most_100_settings_each_described() -> None:
    rows = setting_rows(Settings())
    assert len(rows) <= MAX_SETTINGS, f"{len(rows)} settings; at most {MAX_SETTINGS}"
    assert len({r.key for r in rows}) == len(rows)
    undescribed = [r.key for r in rows if not r.description.strip()]
    assert not undescribed, f"settings without a description: {undescribed}"


def test_docs_settings_md_is_the_generated_table() -> None:
    path = REPO_ROOT / "docs" / "settings.md"
    assert path.read_text(encoding="utf-8") == markdown(setting_rows(Settings())), (
        "docs/settings.md is stale: run `typed-rag config show --markdown > docs/settings.md`"
    )
