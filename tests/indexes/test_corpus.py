"""Reading DPR TSV corpora: formats, malformed rows with line numbers, broken files."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pytest

from indexes.corpus import CorpusReader, read_corpus, resolve_corpus
from indexes.seen_ids import SeenIds, id_key
from tests.conftest import TINY_PASSAGES
from tests.indexes.conftest import write_lines
from typed_rag.errors import UserError

GOOD = [
    "id\ttext\ttitle",
    '1\t"First passage, with ""quotes"" inside."\tAlpha',
    '2\t"Second passage."\tBeta',
    '3\t"Third passage."\t"Gamma ""G"""',
]


def test_reads_tiny_corpus_with_header(tiny_corpus: Path) -> None:
    reader = CorpusReader(tiny_corpus)
    rows = list(reader)
    assert [(r.id, r.title, r.text) for r in rows] == [(p, t, x) for p, t, x in TINY_PASSAGES]
    assert rows[0].line == 2  # line 1 is the header
    assert reader.stats.header and reader.stats.rows == 16 and reader.stats.skipped == 0


def test_dpr_quoting_is_undone(tmp_path: Path) -> None:
    rows = list(read_corpus(write_lines(tmp_path / "c.tsv", GOOD)))
    assert rows[0].text == 'First passage, with "quotes" inside.'
    assert rows[2].title == 'Gamma "G"'
    assert [r.line for r in rows] == [2, 3, 4]


def test_gzip_and_plain_read_the_same(tmp_path: Path) -> None:
    plain = list(read_corpus(write_lines(tmp_path / "c.tsv", GOOD)))
    # detected by content, not by the name
    gz = list(read_corpus(write_lines(tmp_path / "c.data", GOOD, gz=True)))
    assert plain == gz and len(plain) == 3


def test_no_header_means_dpr_column_order(tmp_path: Path) -> None:
    rows = list(read_corpus(write_lines(tmp_path / "c.tsv", GOOD[1:])))
    assert [(r.id, r.title, r.line) for r in rows] == [
        ("1", "Alpha", 1),
        ("2", "Beta", 2),
        ("3", 'Gamma "G"', 3),
    ]


def test_header_decides_column_order(tmp_path: Path) -> None:
    lines = ["title\tid\ttext", 'Alpha\t1\t"Some text."']
    (row,) = read_corpus(write_lines(tmp_path / "c.tsv", lines))
    assert (row.id, row.title, row.text) == ("1", "Alpha", "Some text.")


def test_quoted_field_across_lines_is_one_record(tmp_path: Path) -> None:
    lines = ['1\t"line one', 'line two"\tTitle', '2\t"next"\tT2']
    rows = list(read_corpus(write_lines(tmp_path / "c.tsv", lines)))
    assert [(r.id, r.text, r.line) for r in rows] == [
        ("1", "line one\nline two", 1),
        ("2", "next", 3),
    ]


MALFORMED = [
    ('17\t"only two columns"', "wrong column count: 2"),
    ('17\t"a"\tT\textra', "wrong column count: 4"),
    ("17\t\tTitle", "empty text"),
    ('17\t"   "\tTitle', "empty text"),
    ('\t"text"\tTitle', "empty id"),
    ('17\t"text"junk\tTitle', "bad quoting"),
    ('1\t"duplicate of line 2"\tAgain', "duplicate id '1'"),
    ('17\t"never closed\tTitle', "unterminated quoted field"),
]


def _with_bad_line(bad: str) -> list[str]:
    # header, then good rows 1 and 2, the bad row at line 4, good rows after it
    return [GOOD[0], GOOD[1], GOOD[2], bad, '4\t"after"\tD', '5\t"also after"\tE']


@pytest.mark.parametrize(("bad", "reason"), MALFORMED)
def test_malformed_row_is_skipped_with_line_number(
    tmp_path: Path, bad: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    reader = CorpusReader(write_lines(tmp_path / "c.tsv", _with_bad_line(bad)), "skip")
    with caplog.at_level(logging.WARNING, logger="indexes.corpus"):
        ids = [r.id for r in reader]
    assert ids == ["1", "2", "4", "5"]  # no good row is lost, before or after
    assert reader.stats.skipped == 1
    assert reader.stats.first_error.startswith("line 4: ")
    assert reason in reader.stats.first_error
    assert "skipped 1 malformed rows (first: line 4: " in caplog.text


@pytest.mark.parametrize(("bad", "reason"), MALFORMED)
def test_malformed_row_stops_with_file_and_line(tmp_path: Path, bad: str, reason: str) -> None:
    path = write_lines(tmp_path / "c.tsv", _with_bad_line(bad))
    with pytest.raises(UserError) as info:
        list(CorpusReader(path, "stop"))
    assert str(path) in str(info.value) and "line 4: " in str(info.value)
    assert reason in str(info.value)


def test_bad_utf8_is_reported_with_its_line(tmp_path: Path) -> None:
    data = ("\n".join(GOOD[:3]) + "\n").encode() + b'9\t"caf\xe9 latin-1"\tX\n' + b'4\t"ok"\tD\n'
    path = tmp_path / "c.tsv"
    path.write_bytes(data)
    reader = CorpusReader(path)
    assert [r.id for r in reader] == ["1", "2", "4"]
    assert reader.stats.first_error.startswith("line 4: invalid UTF-8 (byte 0xe9")
    with pytest.raises(UserError, match=r"line 4: invalid UTF-8"):
        list(CorpusReader(path, "stop"))


def test_summary_counts_all_and_names_the_first(tmp_path: Path) -> None:
    lines = [GOOD[0], GOOD[1], "bad", '2\t""\tT', '3\t"ok"\tT']
    reader = CorpusReader(write_lines(tmp_path / "c.tsv", lines))
    assert [r.id for r in reader] == ["1", "3"]
    assert reader.stats.summary() == (
        "read 2 rows; skipped 2 malformed rows (first: line 3: wrong column count: 1 "
        "(expected 3: id, text, title))"
    )


def test_blank_lines_are_not_rows(tmp_path: Path) -> None:
    reader = CorpusReader(write_lines(tmp_path / "c.tsv", [GOOD[1], "", GOOD[2], ""]))
    assert [r.id for r in reader] == ["1", "2"] and reader.stats.skipped == 0


def test_limit_counts_good_rows(tmp_path: Path) -> None:
    lines = [GOOD[0], "bad", GOOD[1], GOOD[2], GOOD[3]]
    assert [r.id for r in read_corpus(write_lines(tmp_path / "c.tsv", lines), limit=2)] == [
        "1",
        "2",
    ]


def test_truncated_gzip_names_path_and_line(tmp_path: Path) -> None:
    lines = [GOOD[0]] + [f'{i}\t"passage number {i} with some words"\tT' for i in range(1, 3001)]
    data = gzip.compress("".join(x + "\n" for x in lines).encode())
    path = tmp_path / "cut.tsv.gz"
    path.write_bytes(data[: len(data) // 2])
    reader = CorpusReader(path)
    with pytest.raises(UserError) as info:
        list(reader)
    message = str(info.value)
    assert "truncated gzip file" in message and str(path) in message
    assert f"after {reader.stats.lines:,} complete lines" in message
    assert 0 < reader.stats.lines < 3001


def test_corrupt_gzip_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.gz"
    path.write_bytes(b"\x1f\x8b" + b"\x00" * 64)
    with pytest.raises(UserError, match="gzip"):
        list(read_corpus(path))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="corpus file not found: .*nope.tsv"):
        list(read_corpus(tmp_path / "nope.tsv"))
    with pytest.raises(UserError, match="not a file"):
        list(read_corpus(tmp_path))


def test_bad_on_error_value(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="on_error"):
        CorpusReader(tmp_path / "x", "ignore")  # type: ignore[arg-type]


def test_url_corpus_is_downloaded_to_home_then_read(
    tmp_path: Path, tiny_corpus: Path, settings, file_server
) -> None:
    file_server.files["tiny.tsv.gz"] = gzip.compress(tiny_corpus.read_bytes())
    path, source = resolve_corpus(file_server.url("tiny.tsv.gz"), settings, show_progress=False)
    assert path == settings.home / "corpora" / "tiny.tsv.gz"
    assert source == file_server.url("tiny.tsv.gz")
    assert [r.id for r in read_corpus(path)] == [p[0] for p in TINY_PASSAGES]
    # a second resolve reuses the file
    resolve_corpus(file_server.url("tiny.tsv.gz"), settings, show_progress=False)
    assert len(file_server.requests) == 1


def test_seen_ids_across_flushes() -> None:
    seen = SeenIds(flush_at=4)
    ids = [str(i) for i in range(10)] + ["a", "b", "007", "7x"]
    assert all(seen.add(pid) for pid in ids)
    assert not any(seen.add(pid) for pid in ids)  # found in the sorted array and the recent set
    assert len(seen) == len(ids)
    assert seen.add("0007")  # not the same id as "7" or "007"
    assert id_key("7") == 7 and id_key("007") < 0 and id_key("x") < 0


def test_multi_line_join_that_is_no_row_gives_lines_back(tmp_path: Path) -> None:
    # line 2 opens a quote that line 3 closes, but the joined record has 4 columns: line 2
    # is reported and line 3 is judged on its own (a well-formed row), as is line 4.
    lines = ['1\t"ok"\tA', '2\t"opens here', 'L3"\tthird\tC', '4\t"kept"\tD']
    reader = CorpusReader(write_lines(tmp_path / "c.tsv", lines))
    assert [(r.id, r.line) for r in reader] == [("1", 1), ('L3"', 3), ("4", 4)]
    assert reader.stats.first_error == "line 2: unterminated quoted field"
    assert reader.stats.skipped == 1
