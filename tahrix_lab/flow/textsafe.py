"""Stored text shown in a terminal, with control characters and escape sequences made visible.

Model output, tool results, labels, memos and questions sent to the service are
untrusted: printed raw, ``ESC[2J`` clears an operator's screen and ``ESC]0;…``
sets the window title, so anyone who can send a question could forge what the
terminal shows. ``safe`` turns every C0/C1 control character, DEL and the
Unicode direction overrides into a visible ``\\xNN`` / ``\\uNNNN``, keeping line
breaks and tabs where ``multiline`` allows them; ``shown`` does the same for
text that goes into rich markup.
"""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[{_CONTROLS}]")
_UNSAFE_LINE = re.compile(f"[{_CONTROLS}\t\n]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: object, *, multiline: bool = True) -> str:
    """``text`` with control characters shown escaped (line breaks too unless ``multiline``)."""
    value = text if isinstance(text, str) else str(text)
    return (_UNSAFE if multiline else _UNSAFE_LINE).sub(_visible, value)


def shown(text: object, *, multiline: bool = True) -> str:
    """``safe`` text, escaped for rich markup as well."""
    from rich.markup import escape

    return escape(safe(text, multiline=multiline))


def json_safe(line: str) -> str:
    """A JSON text with the C1 controls and direction overrides a JSON encoder leaves raw
    written as ``\\uNNNN`` instead (lossless: they only occur inside strings)."""
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


_C1 = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

__all__ = ["json_safe", "safe", "shown"]
