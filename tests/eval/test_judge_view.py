"""``eval.judging.view.JudgeView``: what the LINKAGE judge reads of an answer."""

import pytest

from eval.judging.validity import scaffolding, vouching
from eval.judging.view import JudgeView

ANSWER = "Leaves turn red as chlorophyll breaks down [1][2]. This is supported by [1] and [2]."


@pytest.mark.parametrize(
    ("view", "read"),
    [
        (JudgeView(), ANSWER),
        (
            JudgeView(strip_citations=True),
            "Leaves turn red as chlorophyll breaks down. This is supported by and.",
        ),
        # a sentence that only cites is found by its numbers, before they are stripped
        (
            JudgeView(strip_citations=True, strip_source_talk=True),
            "Leaves turn red as chlorophyll breaks down.",
        ),
        (JudgeView(strip_source_talk=True), "Leaves turn red as chlorophyll breaks down [1][2]."),
    ],
)
def test_read_strips_what_the_view_names(view: JudgeView, read: str) -> None:
    assert view.read(ANSWER) == read


def test_the_vouching_probe_is_what_the_source_talk_view_removes() -> None:
    answer = vouching("Autumn leaves lose chlorophyll.", "Why do leaves turn red?")
    assert JudgeView(strip_source_talk=True).read(answer) == "Autumn leaves lose chlorophyll."
    # an answer made only of such sentences is read whole, never as nothing
    only = vouching("", "q").strip()
    assert JudgeView(strip_source_talk=True).read(only) == only


def test_the_scaffolded_probe_is_what_the_scaffolding_view_removes() -> None:
    answer = "Autumn leaves lose chlorophyll [1]."
    copy = scaffolding(answer, "Why do leaves turn red?")
    assert JudgeView(strip_scaffolding=True).read(copy) == answer
    assert JudgeView().read(copy) == copy
    heading = "**Perspective 1: Chemistry**\nAutumn leaves lose chlorophyll [1]."
    assert JudgeView(strip_scaffolding=True).read(heading) == (
        "**Chemistry**\nAutumn leaves lose chlorophyll [1]."
    )


def test_identity_names_only_what_is_stripped() -> None:
    assert JudgeView().identity() == {}
    assert JudgeView(True, True).identity() == {"citations": "strip", "source_talk": "strip"}
    assert JudgeView(strip_scaffolding=True).identity() == {"scaffolding": "strip"}
    for view in (
        JudgeView(),
        JudgeView(True, False),
        JudgeView(False, True),
        JudgeView(True, True),
        JudgeView(False, False, True),
        JudgeView(True, True, True),
    ):
        assert JudgeView.from_identity({"protocol": "linkage", **view.identity()}) == view
