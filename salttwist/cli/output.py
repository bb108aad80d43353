# -*- test-case-name: tests.test_output,tests.test_output_highstate -*-
"""
Salt's outputters, so that C{salttwist} prints exactly what C{salt} prints.

These outputters are provided, each matching the layout of the Salt module
of the same name (C{salt/output/nested.py}, C{json_out.py}, C{yaml_out.py},
C{txt.py}, C{raw.py} and C{highstate.py}):

    - C{nested}, the default: a recursive, indented layout with ANSI colours;
    - C{json}: C{json.dumps} with an indent of 4 and keys left in order;
    - C{yaml}: a block-style safe YAML dump;
    - C{txt}: C{id: line} pairs, for shell commands;
    - C{raw}: the Python representation of the data;
    - C{highstate}: the returns of state runs (L{salttwist.cli.highstate}),
      the default for the state functions that run states;
    - C{quiet}: nothing at all.

Like Salt's C{display_output}, L{render} strips trailing whitespace from what
the outputter produced and ends it with one newline; when nothing is left it
returns an empty string, because Salt prints nothing in that case.

The Salt CLI prints each minion's return as it arrives, one C{{id: return}}
dictionary at a time; L{minionReturnLine} renders such an entry.
"""

from __future__ import annotations

import argparse
import json
import pprint
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Mapping
from numbers import Number
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from salttwist.cli.highstate import HighstateOptions

__all__ = [
    "OUTPUTTERS",
    "OutChoice",
    "chosenOutputter",
    "colorTable",
    "defaultOutputter",
    "minionReturnLine",
    "nestedLines",
    "noReturnText",
    "render",
]


OUTPUTTERS: tuple[str, ...] = ("nested", "json", "yaml", "txt", "raw", "highstate", "quiet")


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
    return _NestDisplay(color).display(data, indent, "", [])


def _stripEscapes(text: str) -> str:
    """
    Replace ESC characters, as Salt's C{strip_esc_sequence} does, so that a
    minion cannot send its own terminal control sequences to our terminal.

    @param text: text that came from a minion.
    @return: C{text} with every ESC replaced by C{?}.
    """
    return text.replace("\x1b", "?")


def _decode(value: bytes) -> str:
    """
    Turn bytes into printable text.

    @param value: some bytes, usually UTF-8 text.
    @return: C{value} decoded as UTF-8, undecodable bytes replaced by U+FFFD.
    """
    return value.decode("utf-8", errors="replace")


class _NestDisplay:
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
            ret = _decode(bytes(ret))

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
                keyText = _decode(key) if isinstance(key, bytes) else str(key)
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


def _nested(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{nested} outputter.

    @param data: the data to show.
    @param color: whether to use ANSI colours.
    @param indent: unused: Salt's C{--out-indent} does not apply to it.
    @param retcode: the return code of the job; not 0 turns the structure red.
    @return: the lines, joined by newlines.
    """
    return "\n".join(_NestDisplay(color, retcode).display(data, 0, "", []))


def _jsonable(data: object) -> object:
    """
    Make a structure printable as JSON: bytes, as values or as keys, become
    text.

    @param data: the structure.
    @return: a copy of C{data} with bytes decoded, or C{data} itself when it
        holds no containers.
    """
    if isinstance(data, bytes | bytearray):
        return _decode(bytes(data))
    if isinstance(data, Mapping):
        return {
            (_decode(key) if isinstance(key, bytes) else key): _jsonable(value)
            for key, value in data.items()
        }
    if isinstance(data, list | tuple):
        return [_jsonable(item) for item in data]
    return data


def _json(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{json} outputter, like Salt's C{json_out}: an indent of 4 and no key
    sorting by default, non-ASCII text left as it is, and C{repr()} for
    values JSON cannot represent.

    @param data: the data to show.
    @param color: unused: Salt does not colour JSON.
    @param indent: the indent; C{None} for Salt's default of 4, a negative
        number to print the whole document on one line.
    @param retcode: unused.
    @return: the JSON document.
    """
    if indent is None:
        jsonIndent: int | None = 4
    elif indent < 0:
        jsonIndent = None
    else:
        jsonIndent = indent
    return json.dumps(_jsonable(data), indent=jsonIndent, ensure_ascii=False, default=repr)


class _SafeOrderedDumper(yaml.SafeDumper):
    """
    Salt's C{SafeOrderedDumper}: a safe dumper that writes ordered and default
    dicts as plain maps (keeping the order of an L{OrderedDict}) and writes
    C{NULL} for types YAML cannot represent instead of failing.
    """


def _representOrderedDict(dumper: yaml.SafeDumper, data: OrderedDict[Any, Any]) -> yaml.Node:
    """
    Write an L{OrderedDict} as a map in its own order.

    @param dumper: the dumper.
    @param data: the ordered dict.
    @return: the map node.
    """
    # A list of pairs has no items(), so PyYAML does not sort it.
    return dumper.represent_dict(list(data.items()))


def _representUnknown(dumper: yaml.SafeDumper, data: object) -> yaml.Node:
    """
    Write a value of a type YAML cannot represent as C{NULL}.

    @param dumper: the dumper.
    @param data: the value.
    @return: a null node.
    """
    return dumper.represent_scalar("tag:yaml.org,2002:null", "NULL")


_SafeOrderedDumper.add_representer(OrderedDict, _representOrderedDict)
_SafeOrderedDumper.add_representer(defaultdict, yaml.SafeDumper.represent_dict)
_SafeOrderedDumper.add_representer(None, _representUnknown)


def _yaml(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{yaml} outputter, like Salt's C{yaml_out}: block style, Unicode left
    as it is.

    @param data: the data to show.
    @param color: unused: Salt does not colour YAML.
    @param indent: the indent; C{None} for PyYAML's default, a negative
        number for flow style, as Salt's C{--out-indent} does.
    @param retcode: unused.
    @return: the YAML document.
    """
    params: dict[str, Any] = {"default_flow_style": False}
    if indent is not None:
        if indent >= 0:
            params["indent"] = indent
        else:
            params.update(default_flow_style=True, indent=0)
    return yaml.dump(data, Dumper=_SafeOrderedDumper, allow_unicode=True, **params)


def _txt(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{txt} outputter, like Salt's: one C{key: line} for each line of each
    value of a mapping, in the mapping's order.

    @param data: the data to show; a mapping of minion id to return, or any
        other value, which is printed as text (strings) or pretty-printed.
    @param color: unused.
    @param indent: unused.
    @param retcode: unused.
    @return: the text.
    """
    if isinstance(data, Mapping):
        lines = []
        for key, value in data.items():
            if isinstance(value, bytes | bytearray):
                value = _decode(bytes(value))
            if isinstance(value, str):
                lines.extend(f"{key}: {line}\n" for line in value.splitlines())
            else:
                lines.append(f"{key}: {value}\n")
        return "".join(lines)
    if isinstance(data, str):
        return data + "\n"
    return pprint.pformat(data) + "\n"


def _raw(data: object, color: bool, indent: int | None, retcode: int) -> str:
    """
    The C{raw} outputter, like Salt's: C{str()} of the data.

    @param data: the data to show.
    @param color: unused.
    @param indent: unused.
    @param retcode: unused.
    @return: C{str(data)}.
    """
    return data if isinstance(data, str) else str(data)


_OUTPUTTER_FUNCTIONS: dict[str, Callable[[object, bool, int | None, int], str]] = {
    "nested": _nested,
    "json": _json,
    "yaml": _yaml,
    "txt": _txt,
    "raw": _raw,
    "quiet": lambda data, color, indent, retcode: "",
}


def _highstate(
    data: object, color: bool, retcode: int, stateOptions: HighstateOptions | None
) -> str:
    """
    The C{highstate} outputter (L{salttwist.cli.highstate}); data it cannot
    show falls back to C{nested}, as Salt's C{try_printout} does.

    @param data: the data to show.
    @param color: whether to use ANSI colours.
    @param retcode: the job's return code, for the fallback.
    @param stateOptions: the outputter's options; L{None} for Salt's
        defaults.
    @return: the text.
    """
    from salttwist.cli.highstate import HighstateOptions, NotHighstateData, formatHighstate

    try:
        return formatHighstate(data, stateOptions or HighstateOptions(), color)
    except NotHighstateData:
        return _nested(data, color, None, retcode)


def noReturnText(minionId: str, text: str, color: bool = False) -> str:
    """
    How C{salt} shows a minion that did not return when no C{--out} was
    given (Salt's C{no_return} outputter): its id in cyan, each line of
    C{text} 4 columns in, in red.

    @param minionId: the minion's id.
    @param text: what is said of it, e.g. C{Minion did not return. [No
        response]}.
    @param color: whether to use ANSI colours.
    @return: the text to print, ending in one newline.
    """
    colors = colorTable(color)
    lines = [f"{colors['CYAN']}{minionId}{colors['ENDC']}:"]
    lines.extend(f"{colors['RED']}    {line}{colors['ENDC']}" for line in text.split("\n"))
    return "\n".join(lines).rstrip() + "\n"


def defaultOutputter(fun: str, out: str | None) -> str:
    """
    The outputter a command uses for C{fun}'s returns: the one given by
    C{--out}, else C{highstate} for the state functions that run states
    (Salt's C{__outputter__}), else C{nested}.

    @param fun: the function or runner, e.g. C{state.apply}.
    @param out: the C{--out} value, L{None} when not given.
    @return: one of L{OUTPUTTERS}.
    """
    if out is not None:
        return out
    from salttwist.cli.highstate import highstateFunction

    return "highstate" if highstateFunction(fun) else "nested"


def render(
    outputter: str,
    data: object,
    color: bool = False,
    indent: int | None = None,
    *,
    retcode: int = 0,
    stateOptions: HighstateOptions | None = None,
) -> str:
    """
    Format data the way Salt's outputter of the same name does.

    @param outputter: one of L{OUTPUTTERS}.
    @param data: the data to show, usually a mapping of minion id to return.
    @param color: whether to use ANSI colours (only C{nested} has any).
    @param indent: Salt's C{--out-indent}, for C{json} and C{yaml}: C{None}
        for the default, a negative number for one-line/flow output.
    @param retcode: the job's return code; C{nested} shows its structure in
        red when it is not 0, as C{salt} does for failed minions.
    @param stateOptions: the options of the C{highstate} outputter
        (C{state_output}, C{state_verbose}, ...); L{None} for Salt's
        defaults.
    @return: the text to print: stripped of trailing whitespace and ending in
        one newline, or empty when there is nothing to print.
    @raise ValueError: if C{outputter} is not one of L{OUTPUTTERS}.
    """
    if outputter == "highstate":
        text = _highstate(data, color, retcode, stateOptions).rstrip()
        return text + "\n" if text else ""
    try:
        function = _OUTPUTTER_FUNCTIONS[outputter]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown outputter {outputter!r}; valid outputters are: {', '.join(OUTPUTTERS)}"
        ) from None
    text = function(data, color, indent, retcode).rstrip()
    return text + "\n" if text else ""


def minionReturnLine(
    minionId: str,
    value: object,
    outputter: str,
    color: bool = False,
    *,
    indent: int | None = None,
    retcode: int = 0,
    stateOptions: HighstateOptions | None = None,
) -> str:
    """
    Format one minion's return on its own, as C{salt} does when it prints
    returns one by one as they arrive.

    @param minionId: the id of the minion.
    @param value: what the minion returned.
    @param outputter: one of L{OUTPUTTERS}.
    @param color: whether to use ANSI colours.
    @param indent: as for L{render}; pass a negative number to get each JSON
        return on a single line.
    @param retcode: as for L{render}.
    @param stateOptions: as for L{render}.
    @return: the rendering of C{{minionId: value}}; for C{json}, one JSON
        object holding that single entry.
    @raise ValueError: if C{outputter} is not one of L{OUTPUTTERS}.
    """
    return render(
        outputter, {minionId: value}, color, indent, retcode=retcode, stateOptions=stateOptions
    )


class OutChoice(argparse.Action):
    """
    The C{--out} option of a command: stores the outputter and records in
    C{out_given} that it was given, so that a command can tell C{--out
    nested} from no C{--out} at all (state functions print with
    C{highstate} then, see L{defaultOutputter}).
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """
        Store the outputter and note that it was chosen.
        """
        setattr(namespace, self.dest, values)
        namespace.out_given = True


def chosenOutputter(options: argparse.Namespace, fun: str) -> str:
    """
    The outputter of a command line parsed with an L{OutChoice} C{--out}:
    the one given, else L{defaultOutputter}'s for C{fun}.

    @param options: the parsed command line.
    @param fun: the function or runner it runs.
    @return: one of L{OUTPUTTERS}.
    """
    return defaultOutputter(fun, options.out if getattr(options, "out_given", False) else None)
