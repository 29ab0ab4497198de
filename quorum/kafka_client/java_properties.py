"""Java's `.properties` format, as Kafka's tools read a `--command-config` file.

`key=value`, `key: value` or `key value`; `#` and `!` start a comment line; a line ending in an
odd number of backslashes goes on on the next line (a JAAS config is often written so); `\\t`,
`\\n`, `\\uXXXX` and an escaped separator mean what they mean to `java.util.Properties.load`.
"""
from __future__ import annotations

from pathlib import Path

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=: \t\f"


class PropertiesError(ValueError):
    pass


def _logical_lines(text: str):
    """(first physical line number, logical line) with continuations joined."""
    pending, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(" \t\f")  # on continuation lines too
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = n
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def _unescape(text: str, where: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"{where}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key and value at the first unescaped separator; whitespace around `=`/`:` is not part of either."""
    i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] in _SEPARATORS:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse(text: str, source: str = "properties") -> dict[str, str]:
    values: dict[str, str] = {}
    for n, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        where = f"{source}:{n}"
        values[_unescape(raw_key, where)] = _unescape(raw_value, where)
    return values


def load(path: str | Path) -> dict[str, str]:
    """The properties of a file (ISO-8859-1 and UTF-8 both read as Kafka reads them: as text)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        text = path.read_text(encoding="latin-1")
    return parse(text, str(path))
