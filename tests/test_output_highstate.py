# -*- test-case-name: tests.test_output_highstate -*-
# The texts Salt printed are kept line for line, however long the lines.
# ruff: noqa: E501
"""
Tests for L{salttwist.cli.highstate}, Salt's C{highstate} outputter.

Every expected text in L{CASES} was printed by Salt 3008.5 itself
(C{salt.output.out_format(data, "highstate", opts)}, the call C{salt-call}
makes) for the same data and options, and copied here byte for byte. The
C{RUN*}, C{DIFF_RUN*} and C{COMPILE_ERRORS} returns are real: C{salt-call
--local --out json state.apply} of test states (C{test.*},
C{file.managed} with a diff, a failed requisite, a warning, Unicode, a
parallel state; the C{*_TEST} ones with C{test=True}) and of an SLS that
does not render; the others are made up to reach the outputter's corners
(orchestrations, strings, numbers, comments, warnings).
"""

from __future__ import annotations

import copy
import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.cli.highstate import (
    HIGHSTATE_FUNCTIONS,
    HighstateOptions,
    NotHighstateData,
    formatHighstate,
    highstateFunction,
)
from salttwist.cli.output import defaultOutputter, minionReturnLine, render
from salttwist.config import loadMinionConfig

RUN: Any = {
    "local": {
        "test_|-ok_state_|-ok_state_|-succeed_without_changes": {
            "name": "ok_state",
            "changes": {},
            "result": True,
            "comment": "Success!",
            "__sls__": "t1",
            "__run_num__": 0,
            "start_time": "19:33:22.292722",
            "duration": 0.329,
            "__id__": "ok_state",
        },
        "test_|-changed_state_|-some name_|-succeed_with_changes": {
            "name": "some name",
            "changes": {"testing": {"old": "Unchanged", "new": "Something pretended to change"}},
            "result": True,
            "comment": "Success!",
            "__sls__": "t1",
            "__run_num__": 1,
            "start_time": "19:33:22.293146",
            "duration": 0.181,
            "__id__": "changed_state",
        },
        "test_|-failed_state_|-failed_state_|-fail_without_changes": {
            "name": "failed_state",
            "changes": {},
            "result": False,
            "comment": "Failure!",
            "__sls__": "t1",
            "__run_num__": 2,
            "start_time": "19:33:22.293399",
            "duration": 0.404,
            "__id__": "failed_state",
        },
        "file_|-fileit_|-/tmp/dsalt/out.txt_|-managed": {
            "changes": {},
            "comment": "File /tmp/dsalt/out.txt is in the correct state",
            "name": "/tmp/dsalt/out.txt",
            "result": True,
            "__sls__": "t1",
            "__run_num__": 3,
            "start_time": "19:33:22.297973",
            "duration": 7.954,
            "__id__": "fileit",
        },
        "test_|-dependent_|-dependent_|-nop": {
            "changes": {},
            "result": False,
            "duration": 0.005,
            "start_time": "19:33:22.306239",
            "comment": "One or more requisite failed: t1.failed_state",
            "__state_ran__": False,
            "__run_num__": 4,
            "__sls__": "t1",
            "__id__": "dependent",
            "name": "dependent",
        },
    }
}

RUN_TEST: Any = {
    "local": {
        "test_|-ok_state_|-ok_state_|-succeed_without_changes": {
            "name": "ok_state",
            "changes": {},
            "result": True,
            "comment": "Success!",
            "__sls__": "t1",
            "__run_num__": 0,
            "start_time": "19:33:38.051612",
            "duration": 0.312,
            "__id__": "ok_state",
        },
        "test_|-changed_state_|-some name_|-succeed_with_changes": {
            "name": "some name",
            "changes": {"testing": {"old": "Unchanged", "new": "Something pretended to change"}},
            "result": None,
            "comment": "If we weren't testing, this would be successful with changes",
            "__sls__": "t1",
            "__run_num__": 1,
            "start_time": "19:33:38.052007",
            "duration": 0.201,
            "__id__": "changed_state",
        },
        "test_|-failed_state_|-failed_state_|-fail_without_changes": {
            "name": "failed_state",
            "changes": {},
            "result": False,
            "comment": "If we weren't testing, this would be a failure!",
            "__sls__": "t1",
            "__run_num__": 2,
            "start_time": "19:33:38.052265",
            "duration": 0.426,
            "__id__": "failed_state",
        },
        "file_|-fileit_|-/tmp/dsalt/out.txt_|-managed": {
            "changes": {},
            "comment": "The file /tmp/dsalt/out.txt is in the correct state",
            "name": "/tmp/dsalt/out.txt",
            "result": True,
            "__sls__": "t1",
            "__run_num__": 3,
            "start_time": "19:33:38.056695",
            "duration": 7.879,
            "__id__": "fileit",
        },
        "test_|-dependent_|-dependent_|-nop": {
            "changes": {},
            "result": False,
            "duration": 0.011,
            "start_time": "19:33:38.064924",
            "comment": "One or more requisite failed: t1.failed_state",
            "__state_ran__": False,
            "__run_num__": 4,
            "__sls__": "t1",
            "__id__": "dependent",
            "name": "dependent",
        },
    }
}

DIFF_RUN: Any = {
    "local": {
        "file_|-edit_file_|-/tmp/dsalt/edit.txt_|-managed": {
            "changes": {"diff": "--- \n+++ \n@@ -1,2 +1,2 @@\n-old line\n+new line\n keep\n"},
            "comment": "File /tmp/dsalt/edit.txt updated",
            "name": "/tmp/dsalt/edit.txt",
            "result": True,
            "__sls__": "t2",
            "__run_num__": 0,
            "start_time": "19:33:34.399229",
            "duration": 8.953,
            "__id__": "edit_file",
        },
        "test_|-warn_state_|-warner_|-configurable_test_state": {
            "name": "warner",
            "changes": {},
            "result": True,
            "comment": "line one\nline two",
            "warnings": ["Something to be careful about"],
            "__sls__": "t2",
            "__run_num__": 1,
            "start_time": "19:33:34.409041",
            "duration": 0.23,
            "__id__": "warn_state",
        },
        "test_|-unicode_state_|-héllo wörld_|-succeed_with_changes": {
            "name": "héllo wörld",
            "changes": {"testing": {"old": "Unchanged", "new": "Something pretended to change"}},
            "result": True,
            "comment": "Success!",
            "__sls__": "t2",
            "__run_num__": 2,
            "start_time": "19:33:34.409331",
            "duration": 0.121,
            "__id__": "unicode_state",
        },
        "test_|-parallel_one_|-parallel_one_|-succeed_without_changes": {
            "name": "parallel_one",
            "result": True,
            "changes": {},
            "comment": "Success!",
            "__sls__": "t2",
            "__run_num__": 3,
            "start_time": "19:33:34.418301",
            "duration": 0.374,
            "__id__": "parallel_one",
            "__parallel__": True,
        },
    }
}

DIFF_RUN_TEST: Any = {
    "local": {
        "file_|-edit_file_|-/tmp/dsalt/edit.txt_|-managed": {
            "changes": {"diff": "--- \n+++ \n@@ -1,2 +1,2 @@\n-old line\n+new line\n keep\n"},
            "comment": "The file "
            "/tmp/dsalt/edit.txt "
            "is set to be "
            "changed\n"
            "Note: No changes "
            "made, actual "
            "changes may\n"
            "be different due "
            "to other states.",
            "name": "/tmp/dsalt/edit.txt",
            "result": None,
            "__sls__": "t2",
            "__run_num__": 0,
            "start_time": "19:33:33.553703",
            "duration": 8.418,
            "__id__": "edit_file",
        },
        "test_|-warn_state_|-warner_|-configurable_test_state": {
            "name": "warner",
            "changes": {},
            "result": True,
            "comment": "line one\nline two",
            "warnings": ["Something to be careful about"],
            "__sls__": "t2",
            "__run_num__": 1,
            "start_time": "19:33:33.562971",
            "duration": 0.224,
            "__id__": "warn_state",
        },
        "test_|-unicode_state_|-héllo wörld_|-succeed_with_changes": {
            "name": "héllo wörld",
            "changes": {"testing": {"old": "Unchanged", "new": "Something pretended to change"}},
            "result": None,
            "comment": "If we weren't testing, this would be successful with changes",
            "__sls__": "t2",
            "__run_num__": 2,
            "start_time": "19:33:33.563257",
            "duration": 0.123,
            "__id__": "unicode_state",
        },
        "test_|-parallel_one_|-parallel_one_|-succeed_without_changes": {
            "name": "parallel_one",
            "result": True,
            "changes": {},
            "comment": "Success!",
            "__sls__": "t2",
            "__run_num__": 3,
            "start_time": "19:33:33.574414",
            "duration": 0.511,
            "__id__": "parallel_one",
            "__parallel__": True,
        },
    }
}

COMPILE_ERRORS: Any = {
    "local": [
        "Rendering SLS 'base:bad' failed: while parsing a flow sequence\n"
        '  in "<unicode string>", line 5, column 6\n'
        "did not find expected ',' or ']'\n"
        '  in "<unicode string>", line 6, column 1'
    ]
}

STRING_RETURN: Any = {"m1": "hello\nworld"}

INT_RETURN: Any = {"m1": 42}

ORCHESTRATION: Any = {
    "salt_master": {
        "salt_|-step_|-state.sls_|-state": {
            "name": "state.sls",
            "result": True,
            "comment": "c",
            "changes": {
                "m1": {
                    "test_|-a_|-b_|-nop": {
                        "name": "n",
                        "result": True,
                        "comment": "c",
                        "changes": {"k": "v"},
                        "__run_num__": 0,
                        "start_time": "10:00:00.000001",
                        "duration": 1.5,
                        "__sls__": "x",
                        "__id__": "i",
                    }
                },
                "m2": ["err one", "err two"],
            },
            "__run_num__": 0,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
        },
        "salt_|-fn_|-test.ping_|-function": {
            "name": "test.ping",
            "result": True,
            "comment": "c",
            "changes": {"ret": {"m1": True}, "out": "highstate"},
            "__run_num__": 1,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
        },
        "salt_|-st_|-web_|-state": {
            "name": "web",
            "result": False,
            "comment": "c",
            "changes": {
                "ret": {
                    "m1": {
                        "test_|-a_|-b_|-nop": {
                            "name": "n",
                            "result": False,
                            "comment": "c",
                            "changes": {},
                            "__run_num__": 0,
                            "start_time": "10:00:00.000001",
                            "duration": 1.5,
                            "__sls__": "x",
                            "__id__": "i",
                        }
                    }
                },
                "out": "highstate",
            },
            "__run_num__": 2,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
        },
    },
    "retcode": 1,
}

LONG_RUN: Any = {
    "m1": {
        "test_|-a_|-b_|-nop": {
            "name": "n",
            "result": True,
            "comment": "c",
            "changes": {},
            "__run_num__": 0,
            "start_time": "10:00:00.000001",
            "duration": 1200.25,
            "__sls__": "x",
            "__id__": "i",
        },
        "test_|-c_|-c_|-nop": {
            "name": "n",
            "result": True,
            "comment": "c",
            "changes": {},
            "__run_num__": 1,
            "start_time": "10:00:00.000001",
            "duration": "3.5 ms",
            "__sls__": "x",
            "__id__": "i",
            "__parallel__": True,
        },
        "test_|-d_|-d_|-nop": {
            "name": "n",
            "result": True,
            "comment": "c",
            "changes": {},
            "__run_num__": 2,
            "start_time": "10:00:00.000001",
            "duration": 7.0,
            "__sls__": "x",
            "__id__": "i",
            "__parallel__": True,
        },
    }
}

COMMENTS: Any = {
    "m1": {
        "test_|-a_|-b_|-nop": {
            "name": "n",
            "result": True,
            "comment": ["one", "two"],
            "changes": {},
            "__run_num__": 0,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
        },
        "test_|-c_|-c_|-nop": {
            "name": "n",
            "result": True,
            "comment": "multi\nline\n",
            "changes": {},
            "__run_num__": 1,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
            "data": {"k": "v", "k2": 3},
        },
    }
}

COMMENT_DATA: Any = {
    "m1": {
        "test_|-a_|-b_|-nop": {
            "name": "n",
            "result": True,
            "comment": "c",
            "changes": {},
            "__run_num__": 0,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
            "data": ["x", "y"],
        },
        "test_|-c_|-c_|-nop": {
            "name": "n",
            "result": True,
            "comment": "c",
            "changes": {},
            "__run_num__": 1,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
            "data": "scalar",
        },
    }
}

NOT_STATES: Any = {"m1": {"foo": "bar", "baz": {"a": 1}}}

NO_RUN_NUM: Any = {
    "m1": {"test_|-a_|-a_|-nop": {"name": "a", "result": True, "comment": "c", "changes": {}}}
}

WARNINGS: Any = {
    "m1": {
        "test_|-a_|-b_|-nop": {
            "name": "n",
            "result": True,
            "comment": "c",
            "changes": {},
            "__run_num__": 0,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
            "warnings": [
                "w w w w w w w w w w w w w w w w w w w w w w w w w "
                "w w w w w w w w w w w w w w w w w w w w w w w w "
                "w ",
                "second warning",
            ],
        },
        "test_|-c_|-c_|-nop": {
            "name": "n",
            "result": False,
            "comment": "c",
            "changes": {},
            "__run_num__": 1,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
            "warnings": ["x"],
        },
    }
}

INVALID_CHANGES: Any = {
    "m1": {
        "test_|-a_|-b_|-nop": {
            "name": "n",
            "result": True,
            "comment": "c",
            "changes": "weird",
            "__run_num__": 0,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
        },
        "test_|-c_|-c_|-nop": {
            "name": "n",
            "result": True,
            "comment": "c",
            "changes": ["l"],
            "__run_num__": 1,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
        },
    }
}

ESCAPES: Any = {
    "m\x1b[31m1": ["err \x1b[31m red"],
    "m2": {
        "test_|-a_|-b_|-nop": {
            "name": "n",
            "result": True,
            "comment": "with \x1b esc",
            "changes": {},
            "__run_num__": 0,
            "start_time": "10:00:00.000001",
            "duration": 1.5,
            "__sls__": "x",
            "__id__": "i",
        }
    },
}

#: (test name, data, options, colour, what it shows, what Salt 3008.5 printed)
CASES: list[tuple[str, Any, dict[str, Any], bool, str, str]] = [
    (
        "runFull",
        RUN,
        {},
        False,
        "A real run: success, changes, failure, a new file, a failed requisite.",
        (
            "local:\n"
            "----------\n"
            "          ID: ok_state\n"
            "    Function: test.succeed_without_changes\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Started: 19:33:22.292722\n"
            "    Duration: 0.329 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: changed_state\n"
            "    Function: test.succeed_with_changes\n"
            "        Name: some name\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Started: 19:33:22.293146\n"
            "    Duration: 0.181 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              testing:\n"
            "                  ----------\n"
            "                  new:\n"
            "                      Something pretended to change\n"
            "                  old:\n"
            "                      Unchanged\n"
            "----------\n"
            "          ID: failed_state\n"
            "    Function: test.fail_without_changes\n"
            "      Result: False\n"
            "     Comment: Failure!\n"
            "     Started: 19:33:22.293399\n"
            "    Duration: 0.404 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: fileit\n"
            "    Function: file.managed\n"
            "        Name: /tmp/dsalt/out.txt\n"
            "      Result: True\n"
            "     Comment: File /tmp/dsalt/out.txt is in the correct state\n"
            "     Started: 19:33:22.297973\n"
            "    Duration: 7.954 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: dependent\n"
            "    Function: test.nop\n"
            "      Result: False\n"
            "     Comment: One or more requisite failed: t1.failed_state\n"
            "     Started: 19:33:22.306239\n"
            "    Duration: 0.005 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 3 (changed=1)\n"
            "Failed:    2\n"
            "------------\n"
            "Total states run:     5\n"
            "Total run time:   8.873 ms\n"
        ),
    ),
    (
        "runTestColour",
        RUN_TEST,
        {},
        True,
        "test=True: None results in light yellow, failures red, changes cyan; the id takes the colour of the last state that was not clean.",
        (
            "\x1b[0;31mlocal:\x1b[0;0m\n"
            "\x1b[0;32m----------\x1b[0;0m\n"
            "    \x1b[0;32m      ID: ok_state\x1b[0;0m\n"
            "    \x1b[0;32mFunction: test.succeed_without_changes\x1b[0;0m\n"
            "    \x1b[0;32m  Result: True\x1b[0;0m\n"
            "    \x1b[0;32m Comment: Success!\x1b[0;0m\n"
            "    \x1b[0;32m Started: 19:33:38.051612\x1b[0;0m\n"
            "    \x1b[0;32mDuration: 0.312 ms\x1b[0;0m\n"
            "\x1b[0;32m     Changes:   \x1b[0;0m\n"
            "\x1b[0;1;33m----------\x1b[0;0m\n"
            "    \x1b[0;1;33m      ID: changed_state\x1b[0;0m\n"
            "    \x1b[0;1;33mFunction: test.succeed_with_changes\x1b[0;0m\n"
            "    \x1b[0;1;33m    Name: some name\x1b[0;0m\n"
            "    \x1b[0;1;33m  Result: None\x1b[0;0m\n"
            "    \x1b[0;1;33m Comment: If we weren't testing, this would be successful with changes\x1b[0;0m\n"
            "    \x1b[0;1;33m Started: 19:33:38.052007\x1b[0;0m\n"
            "    \x1b[0;1;33mDuration: 0.201 ms\x1b[0;0m\n"
            "\x1b[0;1;33m     Changes:   \n"
            "              \x1b[0;36m----------\x1b[0;0m\n"
            "              \x1b[0;36mtesting\x1b[0;0m:\n"
            "                  \x1b[0;36m----------\x1b[0;0m\n"
            "                  \x1b[0;36mnew\x1b[0;0m:\n"
            "                      \x1b[0;32mSomething pretended to change\x1b[0;0m\n"
            "                  \x1b[0;36mold\x1b[0;0m:\n"
            "                      \x1b[0;32mUnchanged\x1b[0;0m\x1b[0;0m\n"
            "\x1b[0;31m----------\x1b[0;0m\n"
            "    \x1b[0;31m      ID: failed_state\x1b[0;0m\n"
            "    \x1b[0;31mFunction: test.fail_without_changes\x1b[0;0m\n"
            "    \x1b[0;31m  Result: False\x1b[0;0m\n"
            "    \x1b[0;31m Comment: If we weren't testing, this would be a failure!\x1b[0;0m\n"
            "    \x1b[0;31m Started: 19:33:38.052265\x1b[0;0m\n"
            "    \x1b[0;31mDuration: 0.426 ms\x1b[0;0m\n"
            "\x1b[0;31m     Changes:   \x1b[0;0m\n"
            "\x1b[0;32m----------\x1b[0;0m\n"
            "    \x1b[0;32m      ID: fileit\x1b[0;0m\n"
            "    \x1b[0;32mFunction: file.managed\x1b[0;0m\n"
            "    \x1b[0;32m    Name: /tmp/dsalt/out.txt\x1b[0;0m\n"
            "    \x1b[0;32m  Result: True\x1b[0;0m\n"
            "    \x1b[0;32m Comment: The file /tmp/dsalt/out.txt is in the correct state\x1b[0;0m\n"
            "    \x1b[0;32m Started: 19:33:38.056695\x1b[0;0m\n"
            "    \x1b[0;32mDuration: 7.879 ms\x1b[0;0m\n"
            "\x1b[0;32m     Changes:   \x1b[0;0m\n"
            "\x1b[0;31m----------\x1b[0;0m\n"
            "    \x1b[0;31m      ID: dependent\x1b[0;0m\n"
            "    \x1b[0;31mFunction: test.nop\x1b[0;0m\n"
            "    \x1b[0;31m  Result: False\x1b[0;0m\n"
            "    \x1b[0;31m Comment: One or more requisite failed: t1.failed_state\x1b[0;0m\n"
            "    \x1b[0;31m Started: 19:33:38.064924\x1b[0;0m\n"
            "    \x1b[0;31mDuration: 0.011 ms\x1b[0;0m\n"
            "\x1b[0;31m     Changes:   \x1b[0;0m\n"
            "\x1b[0;36m\n"
            "Summary for local\n"
            "------------\x1b[0;0m\n"
            "\x1b[0;32mSucceeded: 3\x1b[0;0m (\x1b[0;1;33munchanged=1\x1b[0;0m, \x1b[0;32mchanged=1\x1b[0;0m)\n"
            "\x1b[0;31mFailed:    2\x1b[0;0m\n"
            "\x1b[0;36m------------\n"
            "Total states run:     5\x1b[0;0m\n"
            "\x1b[0;36mTotal run time:   8.829 ms\x1b[0;0m\n"
        ),
    ),
    (
        "diffRun",
        DIFF_RUN,
        {},
        False,
        "A file diff shown line by line, a warning, Unicode, a parallel state.",
        (
            "local:\n"
            "----------\n"
            "          ID: edit_file\n"
            "    Function: file.managed\n"
            "        Name: /tmp/dsalt/edit.txt\n"
            "      Result: True\n"
            "     Comment: File /tmp/dsalt/edit.txt updated\n"
            "     Started: 19:33:34.399229\n"
            "    Duration: 8.953 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              diff:\n"
            "                  --- \n"
            "                  +++ \n"
            "                  @@ -1,2 +1,2 @@\n"
            "                  -old line\n"
            "                  +new line\n"
            "                   keep\n"
            "----------\n"
            "          ID: warn_state\n"
            "    Function: test.configurable_test_state\n"
            "        Name: warner\n"
            "      Result: True\n"
            "     Comment: line one\n"
            "              line two\n"
            "     Started: 19:33:34.409041\n"
            "    Duration: 0.23 ms\n"
            "     Changes:   \n"
            "    Warnings: Something to be careful about\n"
            "----------\n"
            "          ID: unicode_state\n"
            "    Function: test.succeed_with_changes\n"
            "        Name: héllo wörld\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Started: 19:33:34.409331\n"
            "    Duration: 0.121 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              testing:\n"
            "                  ----------\n"
            "                  new:\n"
            "                      Something pretended to change\n"
            "                  old:\n"
            "                      Unchanged\n"
            "----------\n"
            "          ID: parallel_one\n"
            "    Function: test.succeed_without_changes\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Started: 19:33:34.418301\n"
            "    Duration: 0.374 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 4 (changed=2)\n"
            "Failed:    0\n"
            "Warnings:  1\n"
            "------------\n"
            "Total states run:     4\n"
            "Total run time:   9.678 ms\n"
        ),
    ),
    (
        "diffRunTestColour",
        DIFF_RUN_TEST,
        {},
        True,
        "The predicted diff of test=True, in colour.",
        (
            "\x1b[0;1;33mlocal:\x1b[0;0m\n"
            "\x1b[0;1;33m----------\x1b[0;0m\n"
            "    \x1b[0;1;33m      ID: edit_file\x1b[0;0m\n"
            "    \x1b[0;1;33mFunction: file.managed\x1b[0;0m\n"
            "    \x1b[0;1;33m    Name: /tmp/dsalt/edit.txt\x1b[0;0m\n"
            "    \x1b[0;1;33m  Result: None\x1b[0;0m\n"
            "    \x1b[0;1;33m Comment: The file /tmp/dsalt/edit.txt is set to be changed\n"
            "              Note: No changes made, actual changes may\n"
            "              be different due to other states.\x1b[0;0m\n"
            "    \x1b[0;1;33m Started: 19:33:33.553703\x1b[0;0m\n"
            "    \x1b[0;1;33mDuration: 8.418 ms\x1b[0;0m\n"
            "\x1b[0;1;33m     Changes:   \n"
            "              \x1b[0;36m----------\x1b[0;0m\n"
            "              \x1b[0;36mdiff\x1b[0;0m:\n"
            "                  \x1b[0;32m--- \x1b[0;0m\n"
            "                  \x1b[0;32m+++ \x1b[0;0m\n"
            "                  \x1b[0;32m@@ -1,2 +1,2 @@\x1b[0;0m\n"
            "                  \x1b[0;32m-old line\x1b[0;0m\n"
            "                  \x1b[0;32m+new line\x1b[0;0m\n"
            "                  \x1b[0;32m keep\x1b[0;0m\x1b[0;0m\n"
            "\x1b[0;32m----------\x1b[0;0m\n"
            "    \x1b[0;32m      ID: warn_state\x1b[0;0m\n"
            "    \x1b[0;32mFunction: test.configurable_test_state\x1b[0;0m\n"
            "    \x1b[0;32m    Name: warner\x1b[0;0m\n"
            "    \x1b[0;32m  Result: True\x1b[0;0m\n"
            "    \x1b[0;32m Comment: line one\n"
            "              line two\x1b[0;0m\n"
            "    \x1b[0;32m Started: 19:33:33.562971\x1b[0;0m\n"
            "    \x1b[0;32mDuration: 0.224 ms\x1b[0;0m\n"
            "\x1b[0;32m     Changes:   \x1b[0;0m\n"
            "   \x1b[0;1;31m Warnings: Something to be careful about\x1b[0;0m\n"
            "\x1b[0;1;33m----------\x1b[0;0m\n"
            "    \x1b[0;1;33m      ID: unicode_state\x1b[0;0m\n"
            "    \x1b[0;1;33mFunction: test.succeed_with_changes\x1b[0;0m\n"
            "    \x1b[0;1;33m    Name: héllo wörld\x1b[0;0m\n"
            "    \x1b[0;1;33m  Result: None\x1b[0;0m\n"
            "    \x1b[0;1;33m Comment: If we weren't testing, this would be successful with changes\x1b[0;0m\n"
            "    \x1b[0;1;33m Started: 19:33:33.563257\x1b[0;0m\n"
            "    \x1b[0;1;33mDuration: 0.123 ms\x1b[0;0m\n"
            "\x1b[0;1;33m     Changes:   \n"
            "              \x1b[0;36m----------\x1b[0;0m\n"
            "              \x1b[0;36mtesting\x1b[0;0m:\n"
            "                  \x1b[0;36m----------\x1b[0;0m\n"
            "                  \x1b[0;36mnew\x1b[0;0m:\n"
            "                      \x1b[0;32mSomething pretended to change\x1b[0;0m\n"
            "                  \x1b[0;36mold\x1b[0;0m:\n"
            "                      \x1b[0;32mUnchanged\x1b[0;0m\x1b[0;0m\n"
            "\x1b[0;32m----------\x1b[0;0m\n"
            "    \x1b[0;32m      ID: parallel_one\x1b[0;0m\n"
            "    \x1b[0;32mFunction: test.succeed_without_changes\x1b[0;0m\n"
            "    \x1b[0;32m  Result: True\x1b[0;0m\n"
            "    \x1b[0;32m Comment: Success!\x1b[0;0m\n"
            "    \x1b[0;32m Started: 19:33:33.574414\x1b[0;0m\n"
            "    \x1b[0;32mDuration: 0.511 ms\x1b[0;0m\n"
            "\x1b[0;32m     Changes:   \x1b[0;0m\n"
            "\x1b[0;36m\n"
            "Summary for local\n"
            "------------\x1b[0;0m\n"
            "\x1b[0;32mSucceeded: 4\x1b[0;0m (\x1b[0;1;33munchanged=2\x1b[0;0m, \x1b[0;32mchanged=2\x1b[0;0m)\n"
            "\x1b[0;36mFailed:    0\x1b[0;0m\n"
            "\x1b[0;1;31mWarnings:  1\x1b[0;0m\n"
            "\x1b[0;36m------------\n"
            "Total states run:     4\x1b[0;0m\n"
            "\x1b[0;36mTotal run time:   9.276 ms\x1b[0;0m\n"
        ),
    ),
    (
        "compileErrors",
        COMPILE_ERRORS,
        {},
        False,
        "A list of strings: Data failed to compile.",
        (
            "local:\n"
            "    Data failed to compile:\n"
            "----------\n"
            "    Rendering SLS 'base:bad' failed: while parsing a flow sequence\n"
            '  in "<unicode string>", line 5, column 6\n'
            "did not find expected ',' or ']'\n"
            '  in "<unicode string>", line 6, column 1\n'
        ),
    ),
    (
        "compileErrorsColour",
        COMPILE_ERRORS,
        {},
        True,
        "Compile errors in light red.",
        (
            "\x1b[0;1;31mlocal:\x1b[0;0m\n"
            "    \x1b[0;1;31mData failed to compile:\x1b[0;0m\n"
            "\x1b[0;1;31m----------\n"
            "    Rendering SLS 'base:bad' failed: while parsing a flow sequence\n"
            '  in "<unicode string>", line 5, column 6\n'
            "did not find expected ',' or ']'\n"
            '  in "<unicode string>", line 6, column 1\x1b[0;0m\n'
        ),
    ),
    (
        "terseColour",
        RUN,
        {"state_output": "terse"},
        True,
        "state_output terse: one line per state.",
        (
            "\x1b[0;31mlocal:\x1b[0;0m\n"
            " \x1b[0;32m Name: ok_state - Function: test.succeed_without_changes - Result: Clean - Started: 19:33:22.292722 - Duration: 0.329 ms\x1b[0;0m\n"
            " \x1b[0;36m Name: some name - Function: test.succeed_with_changes - Result: Changed - Started: 19:33:22.293146 - Duration: 0.181 ms\x1b[0;0m\n"
            " \x1b[0;31m Name: failed_state - Function: test.fail_without_changes - Result: Failed - Started: 19:33:22.293399 - Duration: 0.404 ms\x1b[0;0m\n"
            " \x1b[0;32m Name: /tmp/dsalt/out.txt - Function: file.managed - Result: Clean - Started: 19:33:22.297973 - Duration: 7.954 ms\x1b[0;0m\n"
            " \x1b[0;31m Name: dependent - Function: test.nop - Result: Failed - Started: 19:33:22.306239 - Duration: 0.005 ms\x1b[0;0m\n"
            "\x1b[0;36m\n"
            "Summary for local\n"
            "------------\x1b[0;0m\n"
            "\x1b[0;32mSucceeded: 3\x1b[0;0m (\x1b[0;32mchanged=1\x1b[0;0m)\n"
            "\x1b[0;31mFailed:    2\x1b[0;0m\n"
            "\x1b[0;36m------------\n"
            "Total states run:     5\x1b[0;0m\n"
            "\x1b[0;36mTotal run time:   8.873 ms\x1b[0;0m\n"
        ),
    ),
    (
        "mixed",
        RUN_TEST,
        {"state_output": "mixed"},
        False,
        "state_output mixed: full blocks only for failures.",
        (
            "local:\n"
            "  Name: ok_state - Function: test.succeed_without_changes - Result: Clean - Started: 19:33:38.051612 - Duration: 0.312 ms\n"
            "  Name: some name - Function: test.succeed_with_changes - Result: Differs - Started: 19:33:38.052007 - Duration: 0.201 ms\n"
            "----------\n"
            "          ID: failed_state\n"
            "    Function: test.fail_without_changes\n"
            "      Result: False\n"
            "     Comment: If we weren't testing, this would be a failure!\n"
            "     Started: 19:33:38.052265\n"
            "    Duration: 0.426 ms\n"
            "     Changes:   \n"
            "  Name: /tmp/dsalt/out.txt - Function: file.managed - Result: Clean - Started: 19:33:38.056695 - Duration: 7.879 ms\n"
            "----------\n"
            "          ID: dependent\n"
            "    Function: test.nop\n"
            "      Result: False\n"
            "     Comment: One or more requisite failed: t1.failed_state\n"
            "     Started: 19:33:38.064924\n"
            "    Duration: 0.011 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 3 (unchanged=1, changed=1)\n"
            "Failed:    2\n"
            "------------\n"
            "Total states run:     5\n"
            "Total run time:   8.829 ms\n"
        ),
    ),
    (
        "changes",
        RUN,
        {"state_output": "changes"},
        False,
        "state_output changes: full blocks for changes and failures.",
        (
            "local:\n"
            "  Name: ok_state - Function: test.succeed_without_changes - Result: Clean - Started: 19:33:22.292722 - Duration: 0.329 ms\n"
            "----------\n"
            "          ID: changed_state\n"
            "    Function: test.succeed_with_changes\n"
            "        Name: some name\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Started: 19:33:22.293146\n"
            "    Duration: 0.181 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              testing:\n"
            "                  ----------\n"
            "                  new:\n"
            "                      Something pretended to change\n"
            "                  old:\n"
            "                      Unchanged\n"
            "----------\n"
            "          ID: failed_state\n"
            "    Function: test.fail_without_changes\n"
            "      Result: False\n"
            "     Comment: Failure!\n"
            "     Started: 19:33:22.293399\n"
            "    Duration: 0.404 ms\n"
            "     Changes:   \n"
            "  Name: /tmp/dsalt/out.txt - Function: file.managed - Result: Clean - Started: 19:33:22.297973 - Duration: 7.954 ms\n"
            "----------\n"
            "          ID: dependent\n"
            "    Function: test.nop\n"
            "      Result: False\n"
            "     Comment: One or more requisite failed: t1.failed_state\n"
            "     Started: 19:33:22.306239\n"
            "    Duration: 0.005 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 3 (changed=1)\n"
            "Failed:    2\n"
            "------------\n"
            "Total states run:     5\n"
            "Total run time:   8.873 ms\n"
        ),
    ),
    (
        "filter",
        RUN_TEST,
        {
            "state_output": "filter",
            "state_output_exclude": "True,",
            "state_output_terse": ["False"],
        },
        False,
        "state_output filter with state_output_exclude and state_output_terse.",
        (
            "local:\n"
            "----------\n"
            "          ID: changed_state\n"
            "    Function: test.succeed_with_changes\n"
            "        Name: some name\n"
            "      Result: None\n"
            "     Comment: If we weren't testing, this would be successful with changes\n"
            "     Started: 19:33:38.052007\n"
            "    Duration: 0.201 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              testing:\n"
            "                  ----------\n"
            "                  new:\n"
            "                      Something pretended to change\n"
            "                  old:\n"
            "                      Unchanged\n"
            "  Name: failed_state - Function: test.fail_without_changes - Result: Failed - Started: 19:33:38.052265 - Duration: 0.426 ms\n"
            "  Name: dependent - Function: test.nop - Result: Failed - Started: 19:33:38.064924 - Duration: 0.011 ms\n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 3 (unchanged=1, changed=1)\n"
            "Failed:    2\n"
            "------------\n"
            "Total states run:     5\n"
            "Total run time:   8.829 ms\n"
        ),
    ),
    (
        "fullId",
        RUN,
        {"state_output": "full_id"},
        False,
        "full_id: the id in place of the name.",
        (
            "local:\n"
            "----------\n"
            "          ID: ok_state\n"
            "    Function: test.succeed_without_changes\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Started: 19:33:22.292722\n"
            "    Duration: 0.329 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: changed_state\n"
            "    Function: test.succeed_with_changes\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Started: 19:33:22.293146\n"
            "    Duration: 0.181 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              testing:\n"
            "                  ----------\n"
            "                  new:\n"
            "                      Something pretended to change\n"
            "                  old:\n"
            "                      Unchanged\n"
            "----------\n"
            "          ID: failed_state\n"
            "    Function: test.fail_without_changes\n"
            "      Result: False\n"
            "     Comment: Failure!\n"
            "     Started: 19:33:22.293399\n"
            "    Duration: 0.404 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: fileit\n"
            "    Function: file.managed\n"
            "      Result: True\n"
            "     Comment: File /tmp/dsalt/out.txt is in the correct state\n"
            "     Started: 19:33:22.297973\n"
            "    Duration: 7.954 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: dependent\n"
            "    Function: test.nop\n"
            "      Result: False\n"
            "     Comment: One or more requisite failed: t1.failed_state\n"
            "     Started: 19:33:22.306239\n"
            "    Duration: 0.005 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 3 (changed=1)\n"
            "Failed:    2\n"
            "------------\n"
            "Total states run:     5\n"
            "Total run time:   8.873 ms\n"
        ),
    ),
    (
        "terseIdColour",
        DIFF_RUN,
        {"state_output": "terse_id"},
        True,
        "terse_id, with a warning, in colour.",
        (
            "\x1b[0;32mlocal:\x1b[0;0m\n"
            " \x1b[0;36m Name: edit_file - Function: file.managed - Result: Changed - Started: 19:33:34.399229 - Duration: 8.953 ms\x1b[0;0m\n"
            "\x1b[0;1;31mWarnings:\n"
            "Something to be careful about\x1b[0;0m \x1b[0;32m Name: warn_state - Function: test.configurable_test_state - Result: Clean - Started: 19:33:34.409041 - Duration: 0.23 ms\x1b[0;0m\n"
            " \x1b[0;36m Name: unicode_state - Function: test.succeed_with_changes - Result: Changed - Started: 19:33:34.409331 - Duration: 0.121 ms\x1b[0;0m\n"
            " \x1b[0;32m Name: parallel_one - Function: test.succeed_without_changes - Result: Clean - Started: 19:33:34.418301 - Duration: 0.374 ms\x1b[0;0m\n"
            "\x1b[0;36m\n"
            "Summary for local\n"
            "------------\x1b[0;0m\n"
            "\x1b[0;32mSucceeded: 4\x1b[0;0m (\x1b[0;32mchanged=2\x1b[0;0m)\n"
            "\x1b[0;36mFailed:    0\x1b[0;0m\n"
            "\x1b[0;36m------------\n"
            "Total states run:     4\x1b[0;0m\n"
            "\x1b[0;36mTotal run time:   9.678 ms\x1b[0;0m\n"
        ),
    ),
    (
        "notVerboseColour",
        RUN,
        {"state_verbose": False},
        True,
        "state_verbose False hides the states that succeeded without changes.",
        (
            "\x1b[0;31mlocal:\x1b[0;0m\n"
            "\x1b[0;36m----------\x1b[0;0m\n"
            "    \x1b[0;36m      ID: changed_state\x1b[0;0m\n"
            "    \x1b[0;36mFunction: test.succeed_with_changes\x1b[0;0m\n"
            "    \x1b[0;36m    Name: some name\x1b[0;0m\n"
            "    \x1b[0;36m  Result: True\x1b[0;0m\n"
            "    \x1b[0;36m Comment: Success!\x1b[0;0m\n"
            "    \x1b[0;36m Started: 19:33:22.293146\x1b[0;0m\n"
            "    \x1b[0;36mDuration: 0.181 ms\x1b[0;0m\n"
            "\x1b[0;36m     Changes:   \n"
            "              \x1b[0;36m----------\x1b[0;0m\n"
            "              \x1b[0;36mtesting\x1b[0;0m:\n"
            "                  \x1b[0;36m----------\x1b[0;0m\n"
            "                  \x1b[0;36mnew\x1b[0;0m:\n"
            "                      \x1b[0;32mSomething pretended to change\x1b[0;0m\n"
            "                  \x1b[0;36mold\x1b[0;0m:\n"
            "                      \x1b[0;32mUnchanged\x1b[0;0m\x1b[0;0m\n"
            "\x1b[0;31m----------\x1b[0;0m\n"
            "    \x1b[0;31m      ID: failed_state\x1b[0;0m\n"
            "    \x1b[0;31mFunction: test.fail_without_changes\x1b[0;0m\n"
            "    \x1b[0;31m  Result: False\x1b[0;0m\n"
            "    \x1b[0;31m Comment: Failure!\x1b[0;0m\n"
            "    \x1b[0;31m Started: 19:33:22.293399\x1b[0;0m\n"
            "    \x1b[0;31mDuration: 0.404 ms\x1b[0;0m\n"
            "\x1b[0;31m     Changes:   \x1b[0;0m\n"
            "\x1b[0;31m----------\x1b[0;0m\n"
            "    \x1b[0;31m      ID: dependent\x1b[0;0m\n"
            "    \x1b[0;31mFunction: test.nop\x1b[0;0m\n"
            "    \x1b[0;31m  Result: False\x1b[0;0m\n"
            "    \x1b[0;31m Comment: One or more requisite failed: t1.failed_state\x1b[0;0m\n"
            "    \x1b[0;31m Started: 19:33:22.306239\x1b[0;0m\n"
            "    \x1b[0;31mDuration: 0.005 ms\x1b[0;0m\n"
            "\x1b[0;31m     Changes:   \x1b[0;0m\n"
            "\x1b[0;36m\n"
            "Summary for local\n"
            "------------\x1b[0;0m\n"
            "\x1b[0;32mSucceeded: 3\x1b[0;0m (\x1b[0;32mchanged=1\x1b[0;0m)\n"
            "\x1b[0;31mFailed:    2\x1b[0;0m\n"
            "\x1b[0;36m------------\n"
            "Total states run:     5\x1b[0;0m\n"
            "\x1b[0;36mTotal run time:   8.873 ms\x1b[0;0m\n"
        ),
    ),
    (
        "outputDiff",
        DIFF_RUN_TEST,
        {"state_output_diff": True},
        False,
        "state_output_diff shows only the states that changed or failed.",
        (
            "local:\n"
            "----------\n"
            "          ID: edit_file\n"
            "    Function: file.managed\n"
            "        Name: /tmp/dsalt/edit.txt\n"
            "      Result: None\n"
            "     Comment: The file /tmp/dsalt/edit.txt is set to be changed\n"
            "              Note: No changes made, actual changes may\n"
            "              be different due to other states.\n"
            "     Started: 19:33:33.553703\n"
            "    Duration: 8.418 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              diff:\n"
            "                  --- \n"
            "                  +++ \n"
            "                  @@ -1,2 +1,2 @@\n"
            "                  -old line\n"
            "                  +new line\n"
            "                   keep\n"
            "----------\n"
            "          ID: unicode_state\n"
            "    Function: test.succeed_with_changes\n"
            "        Name: héllo wörld\n"
            "      Result: None\n"
            "     Comment: If we weren't testing, this would be successful with changes\n"
            "     Started: 19:33:33.563257\n"
            "    Duration: 0.123 ms\n"
            "     Changes:   \n"
            "              ----------\n"
            "              testing:\n"
            "                  ----------\n"
            "                  new:\n"
            "                      Something pretended to change\n"
            "                  old:\n"
            "                      Unchanged\n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 4 (unchanged=2, changed=2)\n"
            "Failed:    0\n"
            "------------\n"
            "Total states run:     4\n"
            "Total run time:   9.276 ms\n"
        ),
    ),
    (
        "noProfilePct",
        RUN,
        {"state_output_profile": False, "state_output_pct": True},
        False,
        "No Started/Duration/Total run time; Success % and Failure %.",
        (
            "local:\n"
            "----------\n"
            "          ID: ok_state\n"
            "    Function: test.succeed_without_changes\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: changed_state\n"
            "    Function: test.succeed_with_changes\n"
            "        Name: some name\n"
            "      Result: True\n"
            "     Comment: Success!\n"
            "     Changes:   \n"
            "              ----------\n"
            "              testing:\n"
            "                  ----------\n"
            "                  new:\n"
            "                      Something pretended to change\n"
            "                  old:\n"
            "                      Unchanged\n"
            "----------\n"
            "          ID: failed_state\n"
            "    Function: test.fail_without_changes\n"
            "      Result: False\n"
            "     Comment: Failure!\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: fileit\n"
            "    Function: file.managed\n"
            "        Name: /tmp/dsalt/out.txt\n"
            "      Result: True\n"
            "     Comment: File /tmp/dsalt/out.txt is in the correct state\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: dependent\n"
            "    Function: test.nop\n"
            "      Result: False\n"
            "     Comment: One or more requisite failed: t1.failed_state\n"
            "     Changes:   \n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 3 (changed=1)\n"
            "Failed:    2\n"
            "Success %: 60.0\n"
            "Failure %: 40.0\n"
            "------------\n"
            "Total states run:     5\n"
        ),
    ),
    (
        "tabular",
        RUN,
        {"state_output": "terse", "state_tabular": True},
        False,
        "state_tabular True aligns the terse lines.",
        (
            "local:\n"
            "19:33:22.292722 [  0.329 ms]       test.succeed_without_changes Clean     Name: ok_state\n"
            "19:33:22.293146 [  0.181 ms]       test.succeed_with_changes Changed   Name: some name\n"
            "19:33:22.293399 [  0.404 ms]       test.fail_without_changes Failed    Name: failed_state\n"
            "19:33:22.297973 [  7.954 ms]       file.managed    Clean     Name: /tmp/dsalt/out.txt\n"
            "19:33:22.306239 [  0.005 ms]       test.nop        Failed    Name: dependent\n"
            "\n"
            "Summary for local\n"
            "------------\n"
            "Succeeded: 3 (changed=1)\n"
            "Failed:    2\n"
            "------------\n"
            "Total states run:     5\n"
            "Total run time:   8.873 ms\n"
        ),
    ),
    (
        "stringColour",
        STRING_RETURN,
        {},
        True,
        "A string return, each line indented.",
        ("\x1b[0;36mm1:\x1b[0;0m\n\x1b[0;32m    hello\x1b[0;0m\n\x1b[0;32m    world\x1b[0;0m\n"),
    ),
    (
        "intReturn",
        INT_RETURN,
        {},
        False,
        "A number.",
        ("m1:\n    42\n"),
    ),
    (
        "orchestration",
        ORCHESTRATION,
        {},
        False,
        "An orchestration: nested runs, salt.function returns, a retcode beside the master.",
        (
            "salt_master:\n"
            "----------\n"
            "          ID: step\n"
            "    Function: salt.state\n"
            "        Name: state.sls\n"
            "      Result: True\n"
            "     Comment: c\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:                 \n"
            "              m1:\n"
            "              ----------\n"
            "                        ID: a\n"
            "                  Function: test.nop\n"
            "                      Name: b\n"
            "                    Result: True\n"
            "                   Comment: c\n"
            "                   Started: 10:00:00.000001\n"
            "                  Duration: 1.5 ms\n"
            "                   Changes:   \n"
            "                            ----------\n"
            "                            k:\n"
            "                                v\n"
            "              \n"
            "              Summary for m1\n"
            "              ------------\n"
            "              Succeeded: 1 (changed=1)\n"
            "              Failed:    0\n"
            "              ------------\n"
            "              Total states run:     1\n"
            "              Total run time:   1.500 ms\n"
            "              m2:\n"
            "                  Data failed to compile:\n"
            "              ----------\n"
            "                  err one\n"
            "              ----------\n"
            "                  err two\n"
            "----------\n"
            "          ID: fn\n"
            "    Function: salt.function\n"
            "        Name: test.ping\n"
            "      Result: True\n"
            "     Comment: c\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   \n"
            "              m1:\n"
            "                  True\n"
            "----------\n"
            "          ID: st\n"
            "    Function: salt.state\n"
            "        Name: web\n"
            "      Result: False\n"
            "     Comment: c\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   \n"
            "              m1:\n"
            "              ----------\n"
            "                        ID: a\n"
            "                  Function: test.nop\n"
            "                      Name: b\n"
            "                    Result: False\n"
            "                   Comment: c\n"
            "                   Started: 10:00:00.000001\n"
            "                  Duration: 1.5 ms\n"
            "                   Changes:   \n"
            "              \n"
            "              Summary for m1\n"
            "              ------------\n"
            "              Succeeded: 0\n"
            "              Failed:    1\n"
            "              ------------\n"
            "              Total states run:     1\n"
            "              Total run time:   1.500 ms\n"
            "\n"
            "Summary for salt_master\n"
            "------------\n"
            "Succeeded: 2 (changed=2)\n"
            "Failed:    1\n"
            "------------\n"
            "Total states run:     3\n"
            "Total run time:   4.500 ms\n"
        ),
    ),
    (
        "longRun",
        LONG_RUN,
        {},
        False,
        "A total over 999 ms in seconds; parallel states count their longest.",
        (
            "m1:\n"
            "----------\n"
            "          ID: a\n"
            "    Function: test.nop\n"
            "        Name: b\n"
            "      Result: True\n"
            "     Comment: c\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1200.25 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: c\n"
            "    Function: test.nop\n"
            "      Result: True\n"
            "     Comment: c\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 3.5 ms ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: d\n"
            "    Function: test.nop\n"
            "      Result: True\n"
            "     Comment: c\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 7.0 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for m1\n"
            "------------\n"
            "Succeeded: 3\n"
            "Failed:    0\n"
            "------------\n"
            "Total states run:     3\n"
            "Total run time:   1.207 s\n"
        ),
    ),
    (
        "comments",
        COMMENTS,
        {},
        False,
        "A list comment, a multi-line comment with data.",
        (
            "m1:\n"
            "----------\n"
            "          ID: a\n"
            "    Function: test.nop\n"
            "        Name: b\n"
            "      Result: True\n"
            "     Comment: ['one', 'two']\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: c\n"
            "    Function: test.nop\n"
            "      Result: True\n"
            "     Comment: multi\n"
            "              line\n"
            "\t\tk: v\n"
            "\t\tk2: 3\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for m1\n"
            "------------\n"
            "Succeeded: 2\n"
            "Failed:    0\n"
            "------------\n"
            "Total states run:     2\n"
            "Total run time:   3.000 ms\n"
        ),
    ),
    (
        "commentData",
        COMMENT_DATA,
        {},
        False,
        "Comment data as a list and as a scalar.",
        (
            "m1:\n"
            "----------\n"
            "          ID: a\n"
            "    Function: test.nop\n"
            "        Name: b\n"
            "      Result: True\n"
            "     Comment: c x y\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   \n"
            "----------\n"
            "          ID: c\n"
            "    Function: test.nop\n"
            "      Result: True\n"
            "     Comment: c scalar\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for m1\n"
            "------------\n"
            "Succeeded: 2\n"
            "Failed:    0\n"
            "------------\n"
            "Total states run:     2\n"
            "Total run time:   3.000 ms\n"
        ),
    ),
    (
        "notStates",
        NOT_STATES,
        {},
        False,
        "A mapping that holds no state returns: an empty summary.",
        (
            "m1:\n"
            "The State execution failed to record the order in which all states were executed. The state return missing data is:\n"
            "{'a': 1}\n"
            "\n"
            "Summary for m1\n"
            "-----------\n"
            "Succeeded: 0\n"
            "Failed:   0\n"
            "-----------\n"
            "Total states run:    0\n"
            "Total run time:  0.000 ms\n"
        ),
    ),
    (
        "noRunNumber",
        NO_RUN_NUM,
        {},
        False,
        "A state without __run_num__ is reported first.",
        (
            "m1:\n"
            "The State execution failed to record the order in which all states were executed. The state return missing data is:\n"
            "{'changes': {}, 'comment': 'c', 'name': 'a', 'result': True}\n"
            "----------\n"
            "          ID: a\n"
            "    Function: test.nop\n"
            "      Result: True\n"
            "     Comment: c\n"
            "     Changes:   \n"
            "\n"
            "Summary for m1\n"
            "------------\n"
            "Succeeded: 1\n"
            "Failed:    0\n"
            "------------\n"
            "Total states run:     1\n"
            "Total run time:   0.000 ms\n"
        ),
    ),
    (
        "warningsWrapped",
        WARNINGS,
        {},
        True,
        "Long warnings wrapped at 80 columns, counted in the summary.",
        (
            "\x1b[0;31mm1:\x1b[0;0m\n"
            "\x1b[0;32m----------\x1b[0;0m\n"
            "    \x1b[0;32m      ID: a\x1b[0;0m\n"
            "    \x1b[0;32mFunction: test.nop\x1b[0;0m\n"
            "    \x1b[0;32m    Name: b\x1b[0;0m\n"
            "    \x1b[0;32m  Result: True\x1b[0;0m\n"
            "    \x1b[0;32m Comment: c\x1b[0;0m\n"
            "    \x1b[0;32m Started: 10:00:00.000001\x1b[0;0m\n"
            "    \x1b[0;32mDuration: 1.5 ms\x1b[0;0m\n"
            "\x1b[0;32m     Changes:   \x1b[0;0m\n"
            "   \x1b[0;1;31m Warnings: w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w\n"
            "              w w w w w w w w w w w w w w w w w  second warning\x1b[0;0m\n"
            "\x1b[0;31m----------\x1b[0;0m\n"
            "    \x1b[0;31m      ID: c\x1b[0;0m\n"
            "    \x1b[0;31mFunction: test.nop\x1b[0;0m\n"
            "    \x1b[0;31m  Result: False\x1b[0;0m\n"
            "    \x1b[0;31m Comment: c\x1b[0;0m\n"
            "    \x1b[0;31m Started: 10:00:00.000001\x1b[0;0m\n"
            "    \x1b[0;31mDuration: 1.5 ms\x1b[0;0m\n"
            "\x1b[0;31m     Changes:   \x1b[0;0m\n"
            "   \x1b[0;1;31m Warnings: x\x1b[0;0m\n"
            "\x1b[0;36m\n"
            "Summary for m1\n"
            "------------\x1b[0;0m\n"
            "\x1b[0;32mSucceeded: 1\x1b[0;0m\n"
            "\x1b[0;31mFailed:    1\x1b[0;0m\n"
            "\x1b[0;1;31mWarnings:  2\x1b[0;0m\n"
            "\x1b[0;36m------------\n"
            "Total states run:     2\x1b[0;0m\n"
            "\x1b[0;36mTotal run time:   3.000 ms\x1b[0;0m\n"
        ),
    ),
    (
        "invalidChanges",
        INVALID_CHANGES,
        {},
        False,
        "Changes that are not a mapping.",
        (
            "m1:\n"
            "----------\n"
            "          ID: a\n"
            "    Function: test.nop\n"
            "        Name: b\n"
            "      Result: True\n"
            "     Comment: c\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   Invalid Changes data: weird\n"
            "----------\n"
            "          ID: c\n"
            "    Function: test.nop\n"
            "      Result: True\n"
            "     Comment: c\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   Invalid Changes data: ['l']\n"
            "\n"
            "Summary for m1\n"
            "------------\n"
            "Succeeded: 2 (changed=2)\n"
            "Failed:    0\n"
            "------------\n"
            "Total states run:     2\n"
            "Total run time:   3.000 ms\n"
        ),
    ),
    (
        "escapes",
        ESCAPES,
        {},
        False,
        "ESC in minion ids and compile errors becomes '?'; comments are kept.",
        (
            "m?[31m1:\n"
            "    Data failed to compile:\n"
            "----------\n"
            "    err ?[31m red\n"
            "m2:\n"
            "----------\n"
            "          ID: a\n"
            "    Function: test.nop\n"
            "        Name: b\n"
            "      Result: True\n"
            "     Comment: with \x1b esc\n"
            "     Started: 10:00:00.000001\n"
            "    Duration: 1.5 ms\n"
            "     Changes:   \n"
            "\n"
            "Summary for m2\n"
            "------------\n"
            "Succeeded: 1\n"
            "Failed:    0\n"
            "------------\n"
            "Total states run:     1\n"
            "Total run time:   1.500 ms\n"
        ),
    ),
]


def _render(data: Any, opts: dict[str, Any], color: bool) -> str:
    """
    @return: what C{salttwist} prints for C{data} with the highstate
        outputter and the config options C{opts}.
    """
    return render("highstate", data, color, stateOptions=HighstateOptions.fromConfig(opts))


class SaltCapturedTests(SynchronousTestCase):
    """
    The outputter prints what Salt 3008.5 printed for the same data (see
    L{CASES}): one test per case, named after it.
    """


def _captured(
    name: str, data: Any, opts: dict[str, Any], color: bool, doc: str, expected: str
) -> Any:
    def test(self: SynchronousTestCase) -> None:
        self.assertEqual(_render(data, opts, color), expected)

    test.__name__ = f"test_{name}"
    test.__doc__ = f"{doc} Options {opts!r}, colour {color}: as Salt prints it."
    return test


for _case in CASES:
    setattr(SaltCapturedTests, f"test_{_case[0]}", _captured(*_case))


class EnvelopeTests(SynchronousTestCase):
    """
    Salt's envelopes around state returns are taken off first.
    """

    def test_return(self) -> None:
        """
        C{{"return": data}} prints as C{data}.
        """
        self.assertEqual(_render({"return": RUN}, {}, False), _render(RUN, {}, False))

    def test_data(self) -> None:
        """
        C{{"data": data, "outputter": "highstate"}} (a runner's) prints as
        C{data}.
        """
        wrapped = {"data": RUN, "outputter": "highstate"}
        self.assertEqual(_render(wrapped, {}, True), _render(RUN, {}, True))

    def test_lookupJid(self) -> None:
        """
        A single job entry with C{jid} and C{fun} prints its return's
        C{data}.
        """
        entry = {"local": {"jid": "1" * 20, "fun": "state.apply", "return": {"data": RUN}}}
        self.assertEqual(_render(entry, {}, False), _render(RUN, {}, False))

    def test_orchestrationRetcode(self) -> None:
        """
        The C{retcode} beside the master's entry of an orchestration is not
        shown as a host.
        """
        text = _render(ORCHESTRATION, {}, False)
        self.assertNotIn("retcode", text)

    def test_nothing(self) -> None:
        """
        No returns at all print nothing, as Salt (which logs an error).
        """
        self.assertEqual(render("highstate", {}), "")


class FallbackTests(SynchronousTestCase):
    """
    Data the outputter cannot show falls back to C{nested}, as Salt's
    C{try_printout} does for its C{KeyError}s.
    """

    def test_noChanges(self) -> None:
        """
        A state entry without C{changes} raises L{NotHighstateData} naming
        the tag; L{render} prints the data with C{nested} instead.
        """
        data = {"web1": {"test_|-a_|-a_|-nop": {"result": True, "comment": "", "__run_num__": 0}}}
        e = self.assertRaises(NotHighstateData, formatHighstate, data, HighstateOptions(), False)
        self.assertIn("test_|-a_|-a_|-nop", str(e))
        self.assertEqual(render("highstate", data), render("nested", data))

    def test_noComment(self) -> None:
        """
        A state shown in full without a C{comment} falls back too (Salt
        does); terse output does not need it.
        """
        data = {"web1": {"test_|-a_|-a_|-nop": {"result": True, "changes": {}, "__run_num__": 0}}}
        self.assertEqual(render("highstate", data), render("nested", data))
        terse = HighstateOptions(stateOutput="terse")
        self.assertIn("Name: a - Function: test.nop", render("highstate", data, stateOptions=terse))

    def test_badTag(self) -> None:
        """
        A key that is not C{<module>_|-<id>_|-<name>_|-<fun>} falls back
        (Salt fails with an C{IndexError} there).
        """
        data = {"web1": {"nop": {"result": True, "changes": {}, "comment": "", "__run_num__": 0}}}
        e = self.assertRaises(NotHighstateData, formatHighstate, data, HighstateOptions(), False)
        self.assertIn("'nop' is not a state tag", str(e))
        self.assertEqual(render("highstate", data, True), render("nested", data, True))

    def test_notAMapping(self) -> None:
        """
        A list of returns is not a map by minion: C{nested} shows it.
        """
        self.assertEqual(render("highstate", [1, 2]), render("nested", [1, 2]))

    def test_dataNotMutated(self) -> None:
        """
        Rendering leaves the data as it was (Salt adds C{" ms"} to the
        durations of the data it prints).
        """
        before = copy.deepcopy(RUN)
        _render(RUN, {}, True)
        self.assertEqual(RUN, before)


class OptionsTests(SynchronousTestCase):
    """
    L{HighstateOptions} read from a config and a command line.
    """

    def test_defaults(self) -> None:
        """
        A minion config's defaults are Salt's: full output, verbose, no
        diff-only output, with the profile lines.
        """
        root = self.mktemp()
        os.makedirs(root)
        config = loadMinionConfig(root, overrides={"root_dir": root})
        self.assertEqual(HighstateOptions.fromConfig(config), HighstateOptions())
        self.assertEqual(
            (
                HighstateOptions().stateOutput,
                HighstateOptions().stateVerbose,
                HighstateOptions().stateOutputDiff,
                HighstateOptions().stateOutputProfile,
            ),
            ("full", True, False, True),
        )

    def test_fromConfig(self) -> None:
        """
        Each option is read from its config name; C{state_output} is
        lowercased as Salt does.
        """
        options = HighstateOptions.fromConfig(
            {
                "state_output": "Terse_ID",
                "state_verbose": False,
                "state_output_diff": True,
                "state_output_profile": False,
                "state_output_pct": True,
                "state_tabular": "{1}",
                "state_output_exclude": "True,None",
                "state_output_terse": [False],
            }
        )
        self.assertEqual(
            options,
            HighstateOptions(
                stateOutput="terse_id",
                stateVerbose=False,
                stateOutputDiff=True,
                stateOutputProfile=False,
                stateOutputPct=True,
                stateTabular="{1}",
                exclude=("True", "None"),
                terse=("False",),
            ),
        )

    def test_filterFromCommandLine(self) -> None:
        """
        With C{filter}, the job's C{exclude=} and C{terse=} keyword
        arguments win over the config's, as Salt reads C{__opts__["arg"]}.
        """
        config = {
            "state_output": "filter",
            "state_output_exclude": ["False"],
            "state_output_terse": ["True"],
        }
        arg = ["web", {"exclude": "True,", "terse": "False", "__kwarg__": True}]
        options = HighstateOptions.fromConfig(config, arg)
        self.assertEqual((options.exclude, options.terse), (("True", ""), ("False",)))
        fromArg = render("highstate", RUN_TEST, stateOptions=options)
        byConfig = _render(
            RUN_TEST,
            {
                "state_output": "filter",
                "state_output_exclude": "True,",
                "state_output_terse": ["False"],
            },
            False,
        )
        self.assertEqual(fromArg, byConfig)

    def test_filterId(self) -> None:
        """
        C{filter_id} filters and shows ids as names.
        """
        options = HighstateOptions(stateOutput="filter_id", terse=("True",))
        text = render("highstate", RUN, stateOptions=options)
        self.assertIn("  Name: changed_state - Function: test.succeed_with_changes", text)
        self.assertIn("          ID: failed_state\n", text)


class DefaultOutputterTests(SynchronousTestCase):
    """
    Which functions print with C{highstate} by default.
    """

    def test_stateRuns(self) -> None:
        """
        The state functions that run states, and the orchestration runners,
        print with C{highstate}, as Salt's C{__outputter__} says.
        """
        for fun in (
            "state.apply",
            "state.sls",
            "state.highstate",
            "state.single",
            "state.sls_id",
            "state.test",
            "state.top",
            "state.orchestrate",
            "state.orch",
        ):
            self.assertTrue(highstateFunction(fun), fun)
            self.assertEqual(defaultOutputter(fun, None), "highstate", fun)

    def test_others(self) -> None:
        """
        The C{show_*} functions and everything else print with C{nested}.
        """
        for fun in ("state.show_sls", "state.show_lowstate", "state.running", "test.ping"):
            self.assertFalse(highstateFunction(fun), fun)
            self.assertEqual(defaultOutputter(fun, None), "nested", fun)

    def test_outWins(self) -> None:
        """
        An outputter given on the command line is used in any case.
        """
        self.assertEqual(defaultOutputter("state.apply", "nested"), "nested")
        self.assertEqual(defaultOutputter("test.ping", "highstate"), "highstate")

    def test_jobsAgree(self) -> None:
        """
        C{jobs.lookup_jid} names the highstate outputter for the same
        execution functions.
        """
        from salttwist.runners.jobs import _HIGHSTATE_FUNCTIONS

        self.assertEqual(
            _HIGHSTATE_FUNCTIONS,
            {fun for fun in HIGHSTATE_FUNCTIONS if not fun.startswith("state.orch")},
        )

    def test_minionReturnLine(self) -> None:
        """
        One minion's return, as C{salttwist} prints it on arrival, is the
        highstate text of C{{id: return}}.
        """
        self.assertEqual(
            minionReturnLine("local", RUN["local"], "highstate", True),
            _render(RUN, {}, True),
        )
