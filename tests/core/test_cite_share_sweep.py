"""The post-citing variants benchmarks/cite_share_sweep.py re-cites a run at."""

import pytest

from benchmarks.cite_share_sweep import Variant, versus


@pytest.mark.parametrize(
    ("text", "share", "floor"),
    [("0.5", 0.5, None), ("0.7/0.3", 0.7, 0.3), (" 0.8/0.25 ", 0.8, 0.25)],
)
def test_variant_parses_a_share_and_an_optional_floor(text: str, share: float, floor) -> None:
    variant = Variant.parse(text)
    assert (variant.share, variant.floor) == (share, floor)
    assert Variant.parse(str(variant)) == variant


def test_variant_takes_the_specifics_check_as_a_suffix() -> None:
    variant = Variant.parse("0.7/0.4+specifics")
    assert (variant.share, variant.floor, variant.specifics) == (0.7, 0.4, True)
    assert Variant.parse(str(variant)) == variant
    assert not Variant.parse("0.7/0.4").specifics


@pytest.mark.parametrize("text", ["0.7/high", "0.7+names"])
def test_variant_rejects_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError):
        Variant.parse(text)


def test_versus_pairs_a_variant_with_the_same_variant_of_an_earlier_sweep() -> None:
    earlier = {"shares": {"0.7/0.4": {"by_question": {"q1": [1, 2], "q2": [2, 2]}}}}
    now = {"q1": (2, 2), "q2": (2, 2)}
    vs = versus(earlier, Variant.parse("0.7/0.4"), now)
    assert vs is not None and vs["n"] == 2 and vs["diff"] == pytest.approx(1.0 - 0.75)
    # a variant the earlier sweep lacks, or a sweep written before counts were kept
    assert versus(earlier, Variant.parse("0.5"), now) is None
    assert versus({"shares": {"0.7/0.4": {"share": {}}}}, Variant.parse("0.7/0.4"), now) is None
