# -*- test-case-name: tests.test_states_file_patch -*-
"""
The parts of C{file.patch} that are not the state itself: its C{options}
checked as Salt checks them (no C{-N}, C{-r} or C{-o}, which the state
uses; C{-pN}/C{--strip} become the C{strip}), and the result of a failed
dry run laid out as Salt's C{nested} outputter does in the comment.
"""

from __future__ import annotations

import shlex
from typing import Any

#: Options the state passes itself, refused in C{options}.
RESERVED = ("-N", "--forward", "-r", "--reject-file", "-o", "--output")


class PatchOptionsError(ValueError):
    """
    C{options} cannot be used; the message is the state's comment.
    """


def splitOptions(options: Any, strip: Any) -> tuple[list[str], Any]:
    """
    Salt's handling of C{file.patch}'s C{options}.

    @return: the options to pass on and the strip level (C{strip}, unless
        the options give one).
    @raise PatchOptionsError: for reserved options or a malformed strip.
    """
    if options is None:
        words: list[str] = []
    elif isinstance(options, str):
        try:
            words = shlex.split(options)
        except ValueError as e:
            raise PatchOptionsError(f"Invalid options {options!r}: {e}") from None
    else:
        words = [str(o) for o in options]
    kept: list[str] = []
    refused: list[str] = []
    index = 0
    while index < len(words):
        option = words[index]
        if option.startswith(RESERVED):
            refused.append(option)
        if option.startswith("-p"):
            try:
                strip = int(option[2:])
            except ValueError:
                raise PatchOptionsError(
                    "Invalid format for '-p' CLI option. Consider using the 'strip' option "
                    "for this state."
                ) from None
        elif option.startswith("--strip"):
            value = option.split("=", 1)[1] if "=" in option else None
            if value is None:
                index += 1
                value = words[index] if index < len(words) else ""
            try:
                strip = int(value)
            except ValueError:
                raise PatchOptionsError(
                    "Invalid format for '-strip' CLI option. Consider using the 'strip' "
                    "option for this state."
                ) from None
        else:
            kept.append(option)
        index += 1
    if refused:
        raise PatchOptionsError(f"The following CLI options are not allowed: {', '.join(refused)}")
    return kept, strip


def nestedResult(result: dict[str, Any], indent: int = 14) -> str:
    """
    @return: a command's result (C{pid}, C{retcode}, C{stdout},
        C{stderr}) as Salt's C{nested} outputter shows it without colour,
        C{indent} columns in (the keys sorted, text one line per line, an
        empty text showing nothing).
    """
    pad = " " * indent
    lines = [f"{pad}----------"]
    for key in sorted(result, key=str):
        lines.append(f"{pad}{key}:")
        value = result[key]
        text = value if isinstance(value, str) else str(value)
        lines.extend(f"{pad}    {one}" for one in text.splitlines())
    return "\n".join(lines)
