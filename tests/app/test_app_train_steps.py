"""The page says what a training step's program returns (issue #50): pasted as a user would, a
Flax NNX step shows the one state line the CLI and the report say, and a program that returns
nothing shows the one line that says so, not a silent '0 → 0'."""

from __future__ import annotations

import pytest

from analysis.render.summary import empty_note, state_note
from app.page_helpers import wrapped_text
from tests.app.test_app import _paste_and_compile, _shown, at  # noqa: F401 - ``at`` is the page's fixture
from tests.compile.test_train_steps import NNX_STEP, RETURNS_NOTHING


def test_the_page_says_the_state_a_step_returns(at):  # noqa: F811
    pytest.importorskip("flax")
    pytest.importorskip("optax")
    _paste_and_compile(at, NNX_STEP)
    assert not at.exception
    b = _shown(at).bundle
    line = state_note(b)
    assert line and "6 parameter arrays" in line
    assert [i.value for i in at.info].count(wrapped_text(line)) == 1  # drawn exactly as written
    assert not any("returns nothing" in w.value for w in at.warning)


def test_the_page_says_a_program_returns_nothing(at):  # noqa: F811
    _paste_and_compile(at, RETURNS_NOTHING)
    assert not at.exception
    line = empty_note(_shown(at).bundle)
    assert line and [w.value for w in at.warning].count(wrapped_text(line)) == 1
