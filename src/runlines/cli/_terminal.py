"""What the CLI prints of a log, made safe for a terminal: control characters shown, not obeyed.

A log holds whatever its writer put in names and values, so a file, event or field name can
carry ESC sequences (clear the screen, set the window title, OSC 52 sets the clipboard), a
carriage return that overwrites a line, or a bidi override that reorders it. Every command
passes the text it prints of a log through `printable` (one line) or `printable_lines`.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["printable", "printable_lines"]

# C0 controls, DEL, C1 controls (U+009B is a one-character CSI), bidi embeddings, overrides
# and isolates, the marks that reorder text, and the Unicode line and paragraph separators
_UNSAFE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(found: re.Match[str]) -> str:
    char = found.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """Return *text* with each control character written as its escape (``\\x1b``, ``\\n``)."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


def printable_lines(text: str) -> str:
    """Return *text* of several lines with each line made `printable`; the newlines stay."""
    return "\n".join(printable(line) for line in text.split("\n"))
