"""``typed_rag.finishing.repeats.drop_repeats``: a small model's loops said once, its layout kept."""

import pytest

from typed_rag.finishing.repeats import drop_repeats

LOOP = "#### Calendar\nThe difference is about [1]:\n- [1] 6 days\n- [2] 6 days\n- [3] 6 days"
PENN = "The Commonwealth of Pennsylvania was founded by William Penn in 1681 [1]."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a short sentence said three times is a loop: once, and the emptied items go
        (LOOP, "#### Calendar\nThe difference is about [1]:\n- [1] 6 days"),
        # a long sentence said again goes, whatever its citation; the next one keeps the
        # list marker of the one dropped before it
        (
            f"{PENN}\n\n1. {PENN} It was a grant [2].\n2. {PENN.replace('[1]', '[3]')}",
            f"{PENN}\n\n1. It was a grant [2].",
        ),
        # a short sentence said twice stays (a comparison's "Died in 1963" per side)
        ("- A: Died in 1963.\n- B: Died in 1963.", None),
        # headings and all-bold items are layout, said again on purpose
        (
            "1. **What are the two kinds of vehicle sold in Europe?**\n\n"
            "1. **What are the two kinds of vehicle sold in Europe?**\n   - Cars [1].",
            None,
        ),
        # an initial is no sentence end: "W. Bush ..." is not split off and dropped
        (
            "How did George W. Bush describe the statement of the singer?\n"
            "George W. Bush described the statement of the singer as disgusting [2].",
            None,
        ),
        # a question inside a line may be part of a title, so lines are not split at "?"
        (
            'The book "Why Can\'t Elephants Jump? Why Are Orang-utans Orange?" [1].\n'
            "Why Are Orang-utans Orange? Why Are Orang-utans Orange?",
            None,
        ),
    ],
)
def test_drop_repeats(text: str, expected: str | None) -> None:
    assert drop_repeats(text) == (text if expected is None else expected)
