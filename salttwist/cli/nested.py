# -*- test-case-name: tests.test_output,tests.test_output_highstate -*-
"""
Salt's C{nested} layout and colours, shared by the outputters
(L{salttwist.cli.output}) and the C{highstate} outputter
(L{salttwist.cli.highstate}), which prints changes with it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from numbers import Number
from typing import Any

__all__ = ["NestDisplay", "colorTable", "decodeBytes", "nestedLines"]


def _sgr(*codes: str) -> str:
    """
    Build an ANSI Select Graphic Rendition sequence the way Salt's
    C{salt.textformat.TextFormat} does: a reset code always comes first.

    @param codes: the SGR codes to set after the reset.
    @return: the escape sequence.
    """
    return "\x1b[" + ";".join(("0",) + codes) + "m"


# The subset of Salt's salt.utils.color.get_colors() used by these outputters.
_COLORS: dict[str, str] = {
    "RED": _sgr("31"),
    "GREEN": _sgr("32"),
    "YELLOW": _sgr("33"),
    "LIGHT_YELLOW": _sgr("1", "33"),
    "LIGHT_RED": _sgr("1", "31"),
    "CYAN": _sgr("36"),
    "ENDC": _sgr("0"),
}

_NO_COLORS: dict[str, str] = dict.fromkeys(_COLORS, "")


def colorTable(color: bool) -> dict[str, str]:
    """
    @param color: whether to use ANSI colours.
    @return: the escape sequences by Salt's colour names (C{RED}, C{GREEN},
        C{YELLOW}, C{LIGHT_YELLOW}, C{LIGHT_RED}, C{CYAN}, C{ENDC}), all
        empty when C{color} is false.
    """
    return _COLORS if color else _NO_COLORS


def nestedLines(data: object, color: bool, indent: int = 0) -> list[str]:
    """
    The lines of the C{nested} outputter for C{data}, starting C{indent}
    columns in (Salt's C{nested_indent}), as the C{highstate} outputter
    shows a state's changes.

    @param data: the data to show.
    @param color: whether to use ANSI colours.
    @param indent: the column the data starts at.
    @return: the lines, without newlines.
    """
    return NestDisplay(color).display(data, indent, "", [])


def _stripEscapes(text: str) -> str:
    """
    Replace ESC characters, as Salt's C{strip_esc_sequence} does, so that a
    minion cannot send its own terminal control sequences to our terminal.

    @param text: text that came from a minion.
    @return: C{text} with every ESC replaced by C{?}.
    """
    return text.replace("\x1b", "?")


def decodeBytes(value: bytes) -> str:
    """
    Turn bytes into printable text.

    @param value: some bytes, usually UTF-8 text.
    @return: C{value} decoded as UTF-8, undecodable bytes replaced by U+FFFD.
    """
    return value.decode("utf-8", errors="replace")


class NestDisplay:
    """
    The C{nested} outputter: the layout of Salt's C{NestDisplay}.

    Each value adds lines to a list:
        - C{None}, booleans and numbers print as C{str}/C{repr}, light yellow;
        - strings print one line per line of text, green;
        - lists print C{- item} lines, and nested containers under C{|_};
        - mappings print C{key:} lines (cyan) with each value 4 columns
          further in; below the top level a C{----------} line comes first.

    @ivar colors: the escape sequences by colour name, all empty when colour
        is off.
    @ivar retcode: the job's return code; when it is not 0, keys, separators
        and list markers are red, as in Salt.
    """

    def __init__(self, color: bool, retcode: int = 0) -> None:
        """
        @param color: whether to use ANSI colours.
        @param retcode: the return code of the job being displayed.
        """
        self.colors = _COLORS if color else _NO_COLORS
        self.retcode = retcode

    def _line(
        self, indent: int, color: str, msg: object, prefix: str = "", suffix: str = ""
    ) -> str:
        """
        Format one output line, in Salt's order: indent, colour, prefix,
        message, end of colour, suffix.

        @param indent: the number of leading spaces.
        @param color: the name of the colour of C{prefix} and C{msg}.
        @param msg: the text of the line.
        @param prefix: text between the indent and C{msg}, such as C{"- "}.
        @param suffix: text after the colour is reset, such as C{":"}.
        @return: the line, without a newline.
        """
        return f"{' ' * indent}{self.colors[color]}{prefix}{msg}{self.colors['ENDC']}{suffix}"

    def _structureColor(self) -> str:
        """
        @return: the colour of mapping keys and C{----------} separators:
            cyan, or red when the job failed.
        """
        return "RED" if self.retcode != 0 else "CYAN"

    def display(self, ret: object, indent: int, prefix: str, out: list[str]) -> list[str]:
        """
        Append the lines showing C{ret} to C{out}.

        @param ret: the value to show.
        @param indent: the column at which C{ret} starts.
        @param prefix: text put before the first line of C{ret}.
        @param out: the lines so far.
        @return: C{out}.
        """
        if isinstance(ret, bytes | bytearray):
            ret = decodeBytes(bytes(ret))

        if ret is None or ret is True or ret is False:
            out.append(self._line(indent, "LIGHT_YELLOW", ret, prefix=prefix))
        elif isinstance(ret, Number):
            # Salt uses repr() so floats show their full precision.
            out.append(self._line(indent, "LIGHT_YELLOW", repr(ret), prefix=prefix))
        elif isinstance(ret, list | tuple):
            markerColor = "RED" if self.retcode != 0 else "GREEN"
            for item in ret:
                if isinstance(item, list | tuple | Mapping):
                    out.append(self._line(indent, markerColor, "|_"))
                    itemPrefix = "" if isinstance(item, Mapping) else "- "
                    self.display(item, indent + 2, itemPrefix, out)
                else:
                    self.display(item, indent, "- ", out)
        elif isinstance(ret, Mapping):
            color = self._structureColor()
            if indent:
                out.append(self._line(indent, color, "----------"))
            for key in _orderedKeys(ret):
                keyText = decodeBytes(key) if isinstance(key, bytes) else str(key)
                out.append(
                    self._line(indent, color, _stripEscapes(keyText), prefix=prefix, suffix=":")
                )
                self.display(ret[key], indent + 4, "", out)
        else:
            # Strings, and (unlike Salt, which prints nothing for them) any
            # other type, shown through str().
            text = ret if isinstance(ret, str) else str(ret)
            linePrefix = prefix
            for line in text.splitlines():
                out.append(self._line(indent, "GREEN", _stripEscapes(line), prefix=linePrefix))
                # Continuation lines line up under the first line's text.
                linePrefix = " " * len(prefix)
        return out


def _orderedKeys(mapping: Mapping[Any, Any]) -> list[Any]:
    """
    Give the keys of a mapping in the order Salt's nested outputter uses.

    @param mapping: a mapping to display.
    @return: the keys in insertion order for an L{OrderedDict}, otherwise
        sorted; when the keys cannot be compared, sorted by their text and
        then by type name so that the order is still stable.
    """
    if isinstance(mapping, OrderedDict):
        return list(mapping)
    try:
        return sorted(mapping)
    except TypeError:
        return sorted(mapping, key=lambda key: (str(key), type(key).__name__))
