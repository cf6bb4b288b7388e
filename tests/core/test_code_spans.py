"""Code-span faithfulness on the known cases: the right command, a wrong one, a copied
passage, prose with numbers and abbreviations that are not spans."""

from __future__ import annotations

from typed_rag.finishing.code_spans import check_spans, code_spans, faithful_share

GIT_PAGE = (
    "To undo the last commit but keep its changes staged, run git reset --soft HEAD^ and "
    "then edit the files. The option --hard discards the changes as well."
)
STASH_PAGE = "git stash saves your local modifications away; git stash pop restores them."
GNUPLOT_PAGE = (
    "To write the plot to a PNG file, use set terminal png size 800,600 followed by "
    "set output 'plot.png' and then replot. The save command saves commands, not images."
)


def test_spans_are_code_options_files_identifiers_and_numbers() -> None:
    answer = (
        "Run `git reset --soft HEAD^` [1]. Then open config.toml, set max_tokens to 512 "
        "and call load_settings() with --verbose; see /etc/hosts, e.g. version 3.2."
    )
    spans = code_spans(answer)
    assert spans[0] == "git reset --soft HEAD^"
    for span in ("config.toml", "max_tokens", "512", "load_settings()", "--verbose", "/etc/hosts"):
        assert span in spans, (span, spans)
    assert "3.2" in spans
    assert "1" not in spans and "e.g" not in spans  # citations and abbreviations are prose


def test_the_right_command_is_faithful_and_the_wrong_one_is_not() -> None:
    right = "Use `git reset --soft HEAD^` to undo the last commit and keep the changes [1]."
    wrong = "Use `git reset HEAD <file>` and then `git commit -a` [2]."
    assert check_spans(right, [GIT_PAGE, STASH_PAGE]).faithful
    check = check_spans(wrong, [GIT_PAGE, STASH_PAGE])
    assert not check.faithful
    assert set(check.missing) == {"git reset HEAD <file>", "git commit -a"}


def test_a_copied_passage_is_faithful_and_an_invented_size_is_not() -> None:
    assert check_spans(GNUPLOT_PAGE, [GNUPLOT_PAGE]).faithful
    invented = "Use set terminal png size 1024,768 and `set output 'plot.png'`."
    check = check_spans(invented, [GNUPLOT_PAGE])
    assert check.missing == ("1024",) or "1024" in check.missing
    assert "set output 'plot.png'" not in check.missing


def test_numbers_match_whole_numbers_only() -> None:
    page = "The default port is 8080 and the limit is 1.5 seconds."
    assert check_spans("It listens on 8080 [1].", [page]).faithful
    assert not check_spans("It listens on 80 [1].", [page]).faithful
    assert not check_spans("The limit is 1.25 seconds.", [page]).faithful


def test_prose_without_spans_counts_as_nothing() -> None:
    check = check_spans("Leaves change colour because chlorophyll breaks down [1].", ["x"])
    assert check.spans == () and check.faithful


def test_shares_over_answers_and_spans() -> None:
    checks = [
        check_spans("Use `git reset --soft HEAD^`.", [GIT_PAGE]),
        check_spans("Use `git commit -a` and --soft.", [GIT_PAGE]),
        check_spans("No spans here.", [GIT_PAGE]),
    ]
    answers, spans = faithful_share(checks)
    assert answers == 0.5  # one of the two answers with spans holds all of them
    assert spans == 2 / 3  # three spans, two shown
    assert faithful_share([check_spans("plain words", ["x"])]) == (None, None)


def test_a_call_is_found_where_the_page_names_the_function() -> None:
    page = ["The member sync writes the buffer; see also pubsync."]
    assert check_spans("Call `sync()` first [1].", page).faithful
    assert check_spans("Call `file.sync()` first [1].", page).missing == ("file.sync()",)
