"""The settings stay few and documented: ``typed-rag config show`` lists at most 100, each
with a description, and ``docs/settings.md`` is its generated table."""

from __future__ import annotations

from cli.config_show import markdown, setting_rows
from eval.settings import LabSettings
from typed_rag.config import REPO_ROOT

MAX_SETTINGS = 100


def test_at_most_100_settings_each_described() -> None:
    rows = setting_rows(LabSettings())
    assert len(rows) <= MAX_SETTINGS, f"{len(rows)} settings; at most {MAX_SETTINGS}"
    assert len({r.key for r in rows}) == len(rows)
    undescribed = [r.key for r in rows if not r.description.strip()]
    assert not undescribed, f"settings without a description: {undescribed}"


def test_docs_settings_md_is_the_generated_table() -> None:
    path = REPO_ROOT / "docs" / "settings.md"
    assert path.read_text(encoding="utf-8") == markdown(setting_rows(LabSettings())), (
        "docs/settings.md is stale: run `typed-rag config show --markdown > docs/settings.md`"
    )


def test_the_runtime_settings_hold_no_evaluation_section() -> None:
    from typed_rag.config import Settings

    assert "eval" not in Settings.model_fields
    assert set(LabSettings.model_fields) == {*Settings.model_fields, "eval"}
