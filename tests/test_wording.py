"""Counts and articles read right in every message (issue 32, "Wording")."""

from __future__ import annotations

import pytest
from cli_support import KEYED, run

from statecore.wording import a, counted


@pytest.mark.parametrize(("count", "noun", "text"), [
    (0, "entry", "0 entries"), (1, "entry", "1 entry"), (2, "entry", "2 entries"),
    (1, "problem", "1 problem"), (1234, "file", "1,234 files"), (1, "keyed entry", "1 keyed entry"),
    (3, "keyed entry", "3 keyed entries"), (2, "key", "2 keys"), (2, "day", "2 days"),
    (2, "class", "2 classes"), (2, "key group", "2 key groups")])
def test_counted(count: int, noun: str, text: str) -> None:
    assert counted(count, noun) == text


@pytest.mark.parametrize(("word", "text"), [
    ("int64", "an int64"), ("string", "a string"), ("uint8", "a uint8"), ("enum", "an enum"),
    ("undecodable value", "an undecodable value"), ("Flink snapshot", "a Flink snapshot"),
    ("8-byte key", "an 8-byte key"), ("object", "an object")])
def test_a(word: str, text: str) -> None:
    assert a(word) == text


def test_a_value_of_the_wrong_type_says_an_int64() -> None:
    from formats.model.arrow_types import value_from_text
    from statecore.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="'x' is not an int64 value"):
        value_from_text("x", "int64")


def test_one_entry_is_one_entry() -> None:
    code, out, _err = run("inspect", KEYED, "--all")
    assert code == 0
    assert " 1 entries" not in out and "\n1 entries" not in out
