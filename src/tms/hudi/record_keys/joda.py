"""Joda-Time date patterns (`DateTimeFormat.forPattern`), which Hudi's timestamp-based key
generator formats partition paths with and parses date strings with.

The letters in common use are translated exactly; any other letter is refused, naming the
pattern. Printing (`DateTimeFormatter.print`): `yyyy` the year zero-padded to four digits, `yy`
its last two, `M`/`MM`, `d`/`dd`, `H`/`HH`, `m`/`mm`, `s`/`ss` the field (two-letter forms
zero-padded), `SSS` the milliseconds. Everything else is literal text: characters that are not
ASCII letters, and text in single quotes (`''` is a quote), as `DateTimeFormat.parseToken` reads
them.

Parsing (`DateTimeFormatter.parseDateTime`) reads numbers greedily without backtracking, as
Joda's `NumberFormatter` does: one or two digits for month, day, hour, minute and second, one to
three for milliseconds, an optional sign and up to nine digits for the year (four when a number
follows it directly). Literal text matches ignoring ASCII case. The whole string must be read;
missing fields default to 1970-01-01T00:00:00.000.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.record_keys.values import chunked, padded

__all__ = ["LocalFields", "Pattern", "local_fields"]

LocalFields = dict[str, pa.ChunkedArray]
"""Local date-time fields by pattern letter: y, M, d, H, m, s, S (milliseconds)."""

_WIDTHS = {"y": (2, 4), "M": (1, 2), "d": (1, 2), "H": (1, 2), "m": (1, 2), "s": (1, 2), "S": (3,)}
"""The letters translated and the widths allowed for each."""
_DEFAULTS = {"y": 1970, "M": 1, "d": 1, "H": 0, "m": 0, "s": 0, "S": 0}


@dataclass(frozen=True)
class _Token:
    letter: str
    """A pattern letter, or '' for literal text."""
    width: int = 0
    text: str = ""


@dataclass(frozen=True)
class Pattern:
    """A Joda date pattern we print and parse exactly as Joda does."""

    text: str
    tokens: tuple[_Token, ...]

    @classmethod
    def compile(cls, text: str, *, parsing: bool = False) -> Pattern:
        """`UnsupportedTableError` naming the pattern when a letter is not translated."""
        if not text:
            raise UnsupportedTableError("an empty date pattern (Joda refuses it)")
        tokens = tuple(_tokens(text))
        for token in tokens:
            widths = _WIDTHS.get(token.letter, ())
            if token.letter and token.width not in widths:
                raise UnsupportedTableError(
                    f"date pattern {text!r} uses {token.letter * token.width!r}, which is not"
                    " translated (handled: yyyy, M, MM, d, dd, H, HH, m, mm, s, ss, SSS and"
                    " literal text; yy when printing only)"
                )
            if parsing and token.letter == "y" and token.width == 2:
                raise UnsupportedTableError(
                    f"date pattern {text!r} parses a two-digit year 'yy', which Joda reads"
                    " around a pivot year; not translated"
                )
        letters = [t.letter for t in tokens if t.letter]
        if parsing and len(letters) != len(set(letters)):
            raise UnsupportedTableError(f"date pattern {text!r} parses a field twice")
        return cls(text, tokens)

    def print(self, fields: LocalFields, rows: int) -> pa.ChunkedArray:
        """Each row's fields printed by the pattern (`DateTimeFormatter.print`)."""
        parts: list[pa.ChunkedArray | str] = [_printed(t, fields) for t in self.tokens]
        if not any(isinstance(p, pa.ChunkedArray) for p in parts):
            return pa.chunked_array([pa.array(["".join(map(str, parts))] * rows, pa.string())])
        return chunked(pc.binary_join_element_wise(*parts, ""))

    def parse(self, value: str) -> datetime | None:
        """The local date-time `value` spells, None when the pattern does not read all of it;
        `ValueError` for fields out of range (Joda fails the write on them too)."""
        match = _regex(self).fullmatch(value)
        if match is None:
            return None
        fields = dict(_DEFAULTS)
        for letter, digits in match.groupdict().items():
            fields[letter] = int(digits.ljust(3, "0")) if letter == "S" else int(digits)
        return datetime(
            fields["y"],
            fields["M"],
            fields["d"],
            fields["H"],
            fields["m"],
            fields["s"],
            fields["S"] * 1000,
        )


def local_fields(millis: pa.ChunkedArray, zone: str) -> LocalFields:
    """The local fields, in `zone`, of instants given as milliseconds since the epoch."""
    instants = millis.cast(pa.timestamp("ms", tz=zone))
    return {
        "y": pc.year(instants),
        "M": pc.month(instants),
        "d": pc.day(instants),
        "H": pc.hour(instants),
        "m": pc.minute(instants),
        "s": pc.second(instants),
        "S": pc.millisecond(instants),
    }


def _printed(token: _Token, fields: LocalFields) -> pa.ChunkedArray | str:
    if not token.letter:
        return token.text
    values = fields[token.letter]
    if token.letter == "y":
        if pc.any(pc.less(values, 0)).as_py():
            raise ValueError("a timestamp before year 0 is not printed")
        if token.width == 2:
            return padded(pc.remainder(values, 100), 2)
    return padded(values, token.width)


def _tokens(text: str) -> list[_Token]:
    """`DateTimeFormat.parseToken`: runs of one letter, and literal text between them."""
    tokens: list[_Token] = []
    index = 0
    while index < len(text):
        char = text[index]
        if _is_letter(char):
            end = index
            while end < len(text) and text[end] == char:
                end += 1
            tokens.append(_Token(char, end - index))
            index = end
            continue
        literal: list[str] = []
        quoted = False
        while index < len(text):
            char = text[index]
            if char == "'":
                if text[index + 1 : index + 2] == "'":
                    literal.append("'")
                    index += 2
                    continue
                quoted = not quoted
            elif not quoted and _is_letter(char):
                break
            else:
                literal.append(char)
            index += 1
        tokens.append(_Token("", 0, "".join(literal)))
    return tokens


@functools.cache
def _regex(pattern: Pattern) -> re.Pattern[str]:
    """The pattern as a regular expression with Joda's greedy, non-backtracking numbers."""
    parts: list[str] = []
    tokens = pattern.tokens
    for index, token in enumerate(tokens):
        if not token.letter:
            parts.append(f"(?i:{re.escape(token.text)})")
        elif token.letter == "y":
            adjacent = index + 1 < len(tokens) and bool(tokens[index + 1].letter)
            parts.append(f"(?P<y>(?>[-+]?[0-9]{{1,{4 if adjacent else 9}}}))")
        elif token.letter == "S":
            parts.append("(?P<S>(?>[0-9]{1,3}))")
        else:
            parts.append(f"(?P<{token.letter}>(?>[0-9]{{1,2}}))")
    return re.compile("".join(parts), re.ASCII)


def _is_letter(char: str) -> bool:
    return "a" <= char <= "z" or "A" <= char <= "Z"
