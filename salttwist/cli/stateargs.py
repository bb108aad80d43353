# -*- test-case-name: tests.test_cli_state_output,tests.test_output_highstate -*-
"""
The command-line side of Salt's C{highstate} outputter
(L{salttwist.cli.highstate}): which functions print with it, and its
options (C{--state-output}, C{--state-verbose}, C{--output-diff}).

Kept apart from the outputter, which imports C{pprint} and C{dataclasses}
(with C{inspect}): every command builds its parser with these, and only
those that print state returns need the outputter.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HIGHSTATE_FUNCTIONS",
    "STATE_OUTPUT_CHOICES",
    "addStateOutputArguments",
    "highstateFunction",
]

#: The execution functions whose returns Salt prints with this outputter
#: (the C{__outputter__} of Salt's C{state} module) and the runners whose
#: returns are state returns (C{state.orchestrate} and its aliases). The
#: C{show_*} functions print with C{nested}, as in Salt.
HIGHSTATE_FUNCTIONS: frozenset[str] = frozenset(
    {
        "state.apply",
        "state.sls",
        "state.sls_id",
        "state.highstate",
        "state.single",
        "state.top",
        "state.test",
        "state.pkg",
        "state.template",
        "state.template_str",
        "state.request",
        "state.check_request",
        "state.run_request",
        "state.orchestrate",
        "state.orch",
        "state.orchestrate_single",
        "state.orchestrate_high",
        "state.orchestrate_show_sls",
    }
)


def highstateFunction(fun: str) -> bool:
    """
    @param fun: an execution function or runner name, e.g. C{state.apply}.
    @return: whether Salt prints its return with the C{highstate}
        outputter when no C{--out} is given.
    """
    return fun in HIGHSTATE_FUNCTIONS


#: The values C{--state-output} takes: Salt's modes and their C{_id} forms.
STATE_OUTPUT_CHOICES: tuple[str, ...] = (
    "full",
    "terse",
    "mixed",
    "changes",
    "filter",
    "full_id",
    "terse_id",
    "mixed_id",
    "changes_id",
    "filter_id",
)


def _stateVerbose(text: str) -> bool:
    """
    Read C{--state-verbose}: C{True} or C{False}, in any case.

    @param text: the value given.
    @return: the boolean.
    @raise argparse.ArgumentTypeError: for anything else.
    """
    import argparse

    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise argparse.ArgumentTypeError(f"expected True or False, not {text!r}")


def addStateOutputArguments(parser: Any, outputDiff: bool = True) -> None:
    """
    Add Salt's options of the C{highstate} outputter to a command line:
    C{--state-output}/C{--state_output}, C{--state-verbose}/C{--state_verbose}
    and (for C{salt} and C{salt-call}) C{--output-diff}.

    @param parser: an C{argparse.ArgumentParser}.
    @param outputDiff: whether to add C{--output-diff}.
    """
    parser.add_argument(
        "--state-output",
        "--state_output",
        dest="state_output",
        choices=STATE_OUTPUT_CHOICES,
        default=None,
        metavar="MODE",
        help="Override the configured state_output value for minion output. "
        "One of full, terse, mixed, changes or filter, or one of them with _id.",
    )
    parser.add_argument(
        "--state-verbose",
        "--state_verbose",
        dest="state_verbose",
        type=_stateVerbose,
        default=None,
        metavar="{True,False}",
        help="Override the configured state_verbose value for minion output: "
        "False hides the states that succeeded without changes.",
    )
    if outputDiff:
        parser.add_argument(
            "--output-diff",
            dest="state_output_diff",
            action="store_true",
            default=False,
            help="Report only those states that have changed.",
        )
