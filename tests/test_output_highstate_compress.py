# -*- test-case-name: tests.test_output_highstate_compress -*-
# The texts Salt printed are kept line for line, however long the lines.
# ruff: noqa: E501
"""
Tests for C{state_compress_ids} in L{salttwist.cli.highstate}.

Each expected text was printed by Salt 3008.5 itself
(C{salt.output.out_format(data, "highstate", opts)} with
C{state_compress_ids: True}, C{color: False}) for L{COMPRESS}: one id
with four C{names} (two succeeded with changes, one failed with changes,
one failed without), one id with two names and no changes, and a single
state.
"""

from __future__ import annotations

import copy
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.cli.highstate import HighstateOptions, compressIds, formatHighstate


def entry(
    name: str,
    id_: str,
    result: bool,
    changes: dict[str, Any],
    run: int,
    start: str,
    duration: float,
    comment: str | None = None,
) -> dict[str, Any]:
    """
    @return: a state entry of SLS C{cmds}.
    """
    return {
        "name": name,
        "changes": changes,
        "result": result,
        "comment": comment or f'Command "{name}" run',
        "__sls__": "cmds",
        "__run_num__": run,
        "start_time": start,
        "duration": duration,
        "__id__": id_,
    }


COMPRESS: Any = {
    "m1": {
        "cmd_|-mixed_|-true_|-run": entry(
            "true", "mixed", True, {"pid": 11, "retcode": 0}, 0, "10:00:00.000300", 1.25
        ),
        "cmd_|-mixed_|-false_|-run": entry(
            "false", "mixed", False, {"pid": 12, "retcode": 1}, 1, "10:00:00.000200", 2.5
        ),
        "cmd_|-mixed_|-/bin/true_|-run": entry(
            "/bin/true", "mixed", True, {"pid": 13, "retcode": 0}, 2, "10:00:00.000100", 3.125
        ),
        "cmd_|-mixed_|-/bin/false_|-run": entry(
            "/bin/false", "mixed", False, {}, 3, "10:00:00.000400", 4.0
        ),
        "file_|-gone_|-/tmp/a_|-absent": entry(
            "/tmp/a",
            "gone",
            True,
            {},
            4,
            "10:00:00.000500",
            0.5,
            comment="File /tmp/a is not present",
        ),
        "file_|-gone_|-/tmp/b_|-absent": entry(
            "/tmp/b",
            "gone",
            True,
            {},
            5,
            "10:00:00.000600",
            0.25,
            comment="File /tmp/b is not present",
        ),
        "test_|-single_|-single_|-succeed_without_changes": entry(
            "single", "single", True, {}, 6, "10:00:00.000700", 0.125, comment="Success!"
        ),
    }
}

#: What Salt printed, by (state_output, state_verbose).
EXPECTED: dict[tuple[str, bool], str] = {
    ("full", True): (
        "m1:\n"
        "----------\n"
        "          ID: mixed (2)\n"
        "    Function: cmd.run\n"
        "        Name: state_compressed_cmds_mixed_True\n"
        "      Result: True\n"
        '     Comment: Command "true" run\n'
        "     Started: 10:00:00.000100\n"
        "    Duration: 4.375 ms\n"
        "     Changes:   \n"
        "              ----------\n"
        "              compressed changes:\n"
        "                  ----------\n"
        "                  /bin/true:\n"
        "                      ----------\n"
        "                      pid:\n"
        "                          13\n"
        "                      retcode:\n"
        "                          0\n"
        "                  true:\n"
        "                      ----------\n"
        "                      pid:\n"
        "                          11\n"
        "                      retcode:\n"
        "                          0\n"
        "----------\n"
        "          ID: mixed (2)\n"
        "    Function: cmd.run\n"
        "        Name: state_compressed_cmds_mixed_False\n"
        "      Result: False\n"
        '     Comment: Command "false" run\n'
        "     Started: 10:00:00.000200\n"
        "    Duration: 6.5 ms\n"
        "     Changes:   \n"
        "              ----------\n"
        "              pid:\n"
        "                  12\n"
        "              retcode:\n"
        "                  1\n"
        "----------\n"
        "          ID: gone (2)\n"
        "    Function: file.absent\n"
        "        Name: state_compressed_cmds_gone_True\n"
        "      Result: True\n"
        "     Comment: File /tmp/a is not present\n"
        "     Started: 10:00:00.000500\n"
        "    Duration: 0.75 ms\n"
        "     Changes:   \n"
        "----------\n"
        "          ID: single\n"
        "    Function: test.succeed_without_changes\n"
        "      Result: True\n"
        "     Comment: Success!\n"
        "     Started: 10:00:00.000700\n"
        "    Duration: 0.125 ms\n"
        "     Changes:   \n"
        "\n"
        "Summary for m1\n"
        "------------\n"
        "Succeeded: 5 (changed=3)\n"
        "Failed:    2\n"
        "------------\n"
        "Total states run:     7\n"
        "Total run time:  11.750 ms"
    ),
    ("full", False): (
        "m1:\n"
        "----------\n"
        "          ID: mixed (2)\n"
        "    Function: cmd.run\n"
        "        Name: state_compressed_cmds_mixed_True\n"
        "      Result: True\n"
        '     Comment: Command "true" run\n'
        "     Started: 10:00:00.000100\n"
        "    Duration: 4.375 ms\n"
        "     Changes:   \n"
        "              ----------\n"
        "              compressed changes:\n"
        "                  ----------\n"
        "                  /bin/true:\n"
        "                      ----------\n"
        "                      pid:\n"
        "                          13\n"
        "                      retcode:\n"
        "                          0\n"
        "                  true:\n"
        "                      ----------\n"
        "                      pid:\n"
        "                          11\n"
        "                      retcode:\n"
        "                          0\n"
        "----------\n"
        "          ID: mixed (2)\n"
        "    Function: cmd.run\n"
        "        Name: state_compressed_cmds_mixed_False\n"
        "      Result: False\n"
        '     Comment: Command "false" run\n'
        "     Started: 10:00:00.000200\n"
        "    Duration: 6.5 ms\n"
        "     Changes:   \n"
        "              ----------\n"
        "              pid:\n"
        "                  12\n"
        "              retcode:\n"
        "                  1\n"
        "\n"
        "Summary for m1\n"
        "------------\n"
        "Succeeded: 5 (changed=3)\n"
        "Failed:    2\n"
        "------------\n"
        "Total states run:     7\n"
        "Total run time:  11.750 ms"
    ),
    ("terse_id", True): (
        "m1:\n"
        "  Name: mixed (2) - Function: cmd.run - Result: Changed - Started: 10:00:00.000100 - Duration: 4.375 ms\n"
        "  Name: mixed (2) - Function: cmd.run - Result: Failed - Started: 10:00:00.000200 - Duration: 6.5 ms\n"
        "  Name: gone (2) - Function: file.absent - Result: Clean - Started: 10:00:00.000500 - Duration: 0.75 ms\n"
        "  Name: single - Function: test.succeed_without_changes - Result: Clean - Started: 10:00:00.000700 - Duration: 0.125 ms\n"
        "\n"
        "Summary for m1\n"
        "------------\n"
        "Succeeded: 5 (changed=3)\n"
        "Failed:    2\n"
        "------------\n"
        "Total states run:     7\n"
        "Total run time:  11.750 ms"
    ),
    ("terse_id", False): (
        "m1:\n"
        "  Name: mixed (2) - Function: cmd.run - Result: Changed - Started: 10:00:00.000100 - Duration: 4.375 ms\n"
        "  Name: mixed (2) - Function: cmd.run - Result: Failed - Started: 10:00:00.000200 - Duration: 6.5 ms\n"
        "\n"
        "Summary for m1\n"
        "------------\n"
        "Succeeded: 5 (changed=3)\n"
        "Failed:    2\n"
        "------------\n"
        "Total states run:     7\n"
        "Total run time:  11.750 ms"
    ),
    ("changes", True): (
        "m1:\n"
        "----------\n"
        "          ID: mixed (2)\n"
        "    Function: cmd.run\n"
        "        Name: state_compressed_cmds_mixed_True\n"
        "      Result: True\n"
        '     Comment: Command "true" run\n'
        "     Started: 10:00:00.000100\n"
        "    Duration: 4.375 ms\n"
        "     Changes:   \n"
        "              ----------\n"
        "              compressed changes:\n"
        "                  ----------\n"
        "                  /bin/true:\n"
        "                      ----------\n"
        "                      pid:\n"
        "                          13\n"
        "                      retcode:\n"
        "                          0\n"
        "                  true:\n"
        "                      ----------\n"
        "                      pid:\n"
        "                          11\n"
        "                      retcode:\n"
        "                          0\n"
        "----------\n"
        "          ID: mixed (2)\n"
        "    Function: cmd.run\n"
        "        Name: state_compressed_cmds_mixed_False\n"
        "      Result: False\n"
        '     Comment: Command "false" run\n'
        "     Started: 10:00:00.000200\n"
        "    Duration: 6.5 ms\n"
        "     Changes:   \n"
        "              ----------\n"
        "              pid:\n"
        "                  12\n"
        "              retcode:\n"
        "                  1\n"
        "  Name: state_compressed_cmds_gone_True - Function: file.absent - Result: Clean - Started: 10:00:00.000500 - Duration: 0.75 ms\n"
        "  Name: single - Function: test.succeed_without_changes - Result: Clean - Started: 10:00:00.000700 - Duration: 0.125 ms\n"
        "\n"
        "Summary for m1\n"
        "------------\n"
        "Succeeded: 5 (changed=3)\n"
        "Failed:    2\n"
        "------------\n"
        "Total states run:     7\n"
        "Total run time:  11.750 ms"
    ),
    ("changes", False): (
        "m1:\n"
        "----------\n"
        "          ID: mixed (2)\n"
        "    Function: cmd.run\n"
        "        Name: state_compressed_cmds_mixed_True\n"
        "      Result: True\n"
        '     Comment: Command "true" run\n'
        "     Started: 10:00:00.000100\n"
        "    Duration: 4.375 ms\n"
        "     Changes:   \n"
        "              ----------\n"
        "              compressed changes:\n"
        "                  ----------\n"
        "                  /bin/true:\n"
        "                      ----------\n"
        "                      pid:\n"
        "                          13\n"
        "                      retcode:\n"
        "                          0\n"
        "                  true:\n"
        "                      ----------\n"
        "                      pid:\n"
        "                          11\n"
        "                      retcode:\n"
        "                          0\n"
        "----------\n"
        "          ID: mixed (2)\n"
        "    Function: cmd.run\n"
        "        Name: state_compressed_cmds_mixed_False\n"
        "      Result: False\n"
        '     Comment: Command "false" run\n'
        "     Started: 10:00:00.000200\n"
        "    Duration: 6.5 ms\n"
        "     Changes:   \n"
        "              ----------\n"
        "              pid:\n"
        "                  12\n"
        "              retcode:\n"
        "                  1\n"
        "\n"
        "Summary for m1\n"
        "------------\n"
        "Succeeded: 5 (changed=3)\n"
        "Failed:    2\n"
        "------------\n"
        "Total states run:     7\n"
        "Total run time:  11.750 ms"
    ),
}


class CompressIdsTests(SynchronousTestCase):
    """
    C{state_compress_ids: True} prints what Salt prints.
    """

    def render(self, mode: str, verbose: bool) -> str:
        options = HighstateOptions.fromConfig(
            {"state_output": mode, "state_verbose": verbose, "state_compress_ids": True}
        )
        return formatHighstate(copy.deepcopy(COMPRESS), options, False)

    def test_full(self) -> None:
        """
        Full output: one block per id, SLS and result, named
        C{state_compressed_<sls>_<id>_<result>}, the count after the id,
        the changes by name; the summary counts every state.
        """
        self.assertEqual(self.render("full", True), EXPECTED[("full", True)])
        self.assertEqual(self.render("full", False), EXPECTED[("full", False)])

    def test_terseId(self) -> None:
        """
        C{terse_id}, the case Salt's option is for.
        """
        self.assertEqual(self.render("terse_id", True), EXPECTED[("terse_id", True)])
        self.assertEqual(self.render("terse_id", False), EXPECTED[("terse_id", False)])

    def test_changes(self) -> None:
        """
        C{changes} output.
        """
        self.assertEqual(self.render("changes", True), EXPECTED[("changes", True)])
        self.assertEqual(self.render("changes", False), EXPECTED[("changes", False)])

    def test_off(self) -> None:
        """
        Without the option, every state is its own block.
        """
        text = formatHighstate(copy.deepcopy(COMPRESS), HighstateOptions(), False)
        self.assertNotIn("state_compressed", text)
        self.assertEqual(text.count("ID: mixed\n"), 4)

    def test_notMutated(self) -> None:
        """
        The data given is not changed.
        """
        data = copy.deepcopy(COMPRESS)
        compressIds(data)
        self.assertEqual(data, COMPRESS)

    def test_notCompressible(self) -> None:
        """
        A return Salt cannot compress (an entry without C{__id__}) is
        shown as it is.
        """
        data = {"m1": {"test_|-a_|-a_|-nop": {"name": "a", "result": True, "changes": {}}}}
        self.assertEqual(compressIds(data), data)

    def test_fromConfig(self) -> None:
        """
        The option is read from C{state_compress_ids}, off by default.
        """
        self.assertIs(HighstateOptions.fromConfig({}).stateCompressIds, False)
        self.assertIs(
            HighstateOptions.fromConfig({"state_compress_ids": True}).stateCompressIds, True
        )
