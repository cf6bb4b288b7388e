"""The post-citing variants benchmarks/cite_share_sweep.py re-cites a run at."""

import pytest

from benchmarks.cite_share_sweep import Variant


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
