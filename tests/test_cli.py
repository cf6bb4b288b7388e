"""The typed-rag entry point: settings errors are one clear line, never a traceback."""

from __future__ import annotations

import pytest

from cli.main import main


@pytest.mark.parametrize(
    ("override", "named"),
    [("engine.backend=nope", "engine.backend"), ("bogus=1", "bogus"), ("noequals", "KEY=VALUE")],
)
def test_bad_settings_name_the_field(override: str, named: str, capsys) -> None:
    assert main(["--set", override, "retrieve", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("typed-rag: error:") and named in err
    assert "Traceback" not in err


def test_missing_config_file_is_a_user_error(tmp_path, capsys) -> None:
    assert main(["--config", str(tmp_path / "none.toml"), "retrieve", "x"]) == 2
    assert "config file not found" in capsys.readouterr().err


def test_config_file_and_override_precedence(tmp_path) -> None:
    from typed_rag.config import load_settings

    cfg = tmp_path / "c.toml"
    cfg.write_text('mode = "rag"\n[engine]\nbackend = "fake"\nn_ctx = 1024\n')
    s = load_settings(cfg, **{"engine.n_ctx": "2048"})
    assert (s.mode, s.engine.backend, s.engine.n_ctx) == ("rag", "fake", 2048)


def test_with_section_validates_and_leaves_the_original_alone() -> None:
    from pydantic import ValidationError

    from typed_rag.config import load_settings

    s = load_settings(**{"retrieval.top_k": "7"})
    hybrid = s.with_section("retrieval", kind="hybrid", fuse_models="a, b")
    assert (hybrid.retrieval.kind, hybrid.retrieval.fuse_models) == ("hybrid", ["a", "b"])
    assert hybrid.retrieval.top_k == 7 and s.retrieval.kind != "hybrid"
    with pytest.raises(ValidationError):
        s.with_section("retrieval", kind="nope")
    with pytest.raises(ValueError, match="retrieval has no setting kindd"):
        s.with_section("retrieval", kindd="hybrid")


def test_set_is_accepted_after_the_subcommand(capsys) -> None:
    """``typed-rag serve --set k=v`` as well as ``typed-rag --set k=v serve``."""
    assert main(["retrieve", "x", "--set", "engine.backend=nope"]) == 2
    assert "engine.backend" in capsys.readouterr().err
    assert main(["retrieve", "x", "--set=bogus=1"]) == 2
    assert "bogus" in capsys.readouterr().err


def test_set_after_the_subcommand_applies(tmp_path) -> None:
    from cli.main import build_parser, parse_args

    parser = build_parser()
    args = parse_args(parser, ["--set", "a=1", "serve", "--port", "9000", "--set", "b=2"])
    assert args.overrides == ["a=1", "b=2"] and args.port == 9000
    args = parse_args(parser, ["serve", "--config", str(tmp_path / "x.toml")])
    assert args.config == str(tmp_path / "x.toml")
    with pytest.raises(SystemExit):
        parse_args(parser, ["serve", "--bogus"])


def _commands(parser) -> dict[str | None, dict[str, str | None]]:
    """Each group's subcommands (None: the top level) with their help text."""
    from cli.main import LAB_COMMANDS, _actions

    top = _actions(parser)
    groups = {None: top, **{g: _actions(top.choices[g]) for g in LAB_COMMANDS if g}}
    return {g: {a.dest: a.help for a in sub._choices_actions} for g, sub in groups.items()}


def test_the_lab_registers_exactly_the_commands_a_runtime_install_names(monkeypatch) -> None:
    from cli import main as cli_main

    with_lab = _commands(cli_main.build_parser())
    monkeypatch.setattr(cli_main, "lab_installed", lambda: False)
    runtime = _commands(cli_main.build_parser())
    for group, names in cli_main.LAB_COMMANDS.items():
        stubs = {n for n, text in runtime[group].items() if text and "not installed" in text}
        assert stubs == set(names)
        assert set(with_lab[group]) - (set(runtime[group]) - stubs) == set(names)
        assert not any("not installed" in (text or "") for text in with_lab[group].values())


def test_a_lab_command_without_the_lab_says_what_it_needs(monkeypatch, capsys) -> None:
    from cli import main as cli_main

    monkeypatch.setattr(cli_main, "lab_installed", lambda: False)
    assert cli_main.main(["index", "eval", "bm25", "--limit", "3"]) == 2
    err = capsys.readouterr().err
    assert "`typed-rag index eval` is a research-lab command" in err
