"""Words for people: an article before a word, a count with its noun in the right number.

Every message and text output counts and names things with these, so none reads "1 entries"
or "a int64".
"""

from __future__ import annotations

__all__ = ["a", "counted"]

_IRREGULAR = {"entry": "entries", "key group": "key groups", "child": "children",
              "index": "indexes", "this": "these"}


def a(word: str) -> str:
    """``word`` with its indefinite article: "an int64", "a string", "an undecodable value"."""
    bare = word.lstrip("`'\"(").lower()
    vowel = bare[:1] in ("a", "e", "i", "o") or bare[:1] == "8" or (
        bare[:1] == "u" and not bare.startswith(("uint", "uni", "uuid", "us", "ut")))
    return f"{'an' if vowel else 'a'} {word}"


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``count`` and its noun: "1 entry", "2 entries", "1,024 files" (thousands separated)."""
    if count == 1:
        return f"1 {singular}"
    if plural is None:
        plural = _IRREGULAR.get(singular) or (
            f"{singular[:-1]}ies" if singular.endswith("y") and singular[-2:-1] not in "aeiou"
            else f"{singular}es" if singular.endswith(("s", "x", "ch", "sh")) else f"{singular}s")
    return f"{count:,} {plural}"
