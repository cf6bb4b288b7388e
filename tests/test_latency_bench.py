"""The latency benchmark's served rates against the probe timed beside each answer: the
ratio is taken per question, so a machine that slows down halfway moves it not at all."""

from __future__ import annotations

import pytest

from benchmarks.latency_bench import served_rates


def _row(tokens: int, seconds: float, limit: float | None) -> dict[str, object]:
    row: dict[str, object] = {
        "engine": {
            "prefill_tokens": tokens,
            "prefill_s": seconds,
            "decode_tokens": tokens,
            "decode_s": seconds,
        }
    }
    if limit is not None:
        row["limit"] = {"prefill_tok_s": limit, "decode_tok_s": limit}
    return row


def test_a_machine_that_halves_its_speed_keeps_the_per_question_ratio() -> None:
    # served 45 tok/s while the probe gets 50, then 20 while it gets 25: 0.9 and 0.8
    rates = served_rates([_row(450, 10.0, 50.0), _row(200, 10.0, 25.0), _row(90, 2.0, 50.0)])
    assert rates["prefill_tok_s"] == pytest.approx(740 / 22)
    assert rates["limit_decode_tok_s"] == 50.0  # the median probe
    assert rates["decode_to_limit"] == pytest.approx(0.9)  # median of 0.9, 0.8, 0.9


def test_without_a_probe_only_the_served_rates_are_given() -> None:
    rates = served_rates([_row(100, 4.0, None)])
    assert rates == {"prefill_tok_s": 25.0, "decode_tok_s": 25.0}
    assert served_rates([_row(0, 0.0, None)]) == {}
