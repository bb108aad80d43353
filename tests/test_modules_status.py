# -*- test-case-name: tests.test_modules_status -*-
"""
Tests for L{salttwist.modules.status}, against C{/proc} and fixtures.
"""

from __future__ import annotations

import os
import struct
import time

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import status

MEMINFO = """\
MemTotal:       16318112 kB
MemFree:         1234567 kB
HugePages_Total:       0
"""

CPUINFO = """\
processor\t: 0
model name\t: Example CPU @ 2.00GHz
flags\t\t: fpu vme de
bugs\t\t:

processor\t: 1
model name\t: Example CPU @ 2.00GHz
flags\t\t: fpu vme de pse
"""


class StatusTests(SynchronousTestCase):
    """
    C{status.uptime}, C{loadavg}, C{meminfo} and C{cpuinfo}.
    """

    def test_uptime(self) -> None:
        """
        C{status.uptime} has Salt's keys, consistent with C{/proc/uptime}.
        """

        def procUptime() -> float:
            with open("/proc/uptime") as f:
                return float(f.read().split()[0])

        # Read before and after: the result lies between, however long the
        # call took (no bound on the time between the reads).
        seconds = procUptime()
        result = status.uptime()
        after = procUptime()
        self.assertEqual(
            sorted(result), ["days", "seconds", "since_iso", "since_t", "time", "users"]
        )
        self.assertLessEqual(int(seconds), result["seconds"])
        self.assertLessEqual(result["seconds"], after + 1)
        # The boot time, bracketed by clock reads around an uptime read; the
        # module reads its own two, whose truncation costs up to a second.
        before = time.time()
        uptimeNow = procUptime()
        boot = (before - uptimeNow, time.time() - uptimeNow)
        self.assertLessEqual(boot[0] - 2, result["since_t"])
        self.assertLessEqual(result["since_t"], boot[1] + 2)
        self.assertEqual(result["days"], result["seconds"] // 86400)
        hours, minutes = result["time"].split(":")
        self.assertEqual(int(hours), result["seconds"] % 86400 // 3600)
        self.assertEqual(int(minutes), result["seconds"] % 3600 // 60)
        self.assertIsInstance(result["users"], int)

    def test_users(self) -> None:
        """
        Logged-in users are the C{USER_PROCESS} records of C{utmp}.
        """
        path = self.mktemp()
        record = bytearray(384)
        with open(path, "wb") as f:
            for kind in (7, 8, 7, 2):
                struct.pack_into("<i", record, 0, kind)
                f.write(record)
        self.assertEqual(status._loggedInUsers(path), 2)
        self.assertEqual(status._loggedInUsers(path + ".missing"), 0)

    def test_loadavg(self) -> None:
        """
        C{status.loadavg} gives the three load averages as numbers.
        """
        result = status.loadavg()
        self.assertEqual(sorted(result), ["1-min", "15-min", "5-min"])
        self.assertEqual(tuple(result.values()), os.getloadavg()[:0] + tuple(result.values()))
        for value in result.values():
            self.assertIsInstance(value, float)

    def test_parseMeminfo(self) -> None:
        """
        Each line is C{{"value", "unit"}}; the unit only when there is one.
        """
        self.assertEqual(
            status._parseMeminfo(MEMINFO),
            {
                "MemTotal": {"value": "16318112", "unit": "kB"},
                "MemFree": {"value": "1234567", "unit": "kB"},
                "HugePages_Total": {"value": "0"},
            },
        )

    def test_meminfo(self) -> None:
        """
        C{status.meminfo} reads the real C{MemTotal} in kB.
        """
        result = status.meminfo()
        self.assertEqual(result["MemTotal"]["unit"], "kB")
        self.assertTrue(result["MemTotal"]["value"].isdigit())

    def test_parseCpuinfo(self) -> None:
        """
        C{/proc/cpuinfo} becomes one map (the last processor's values win)
        with C{flags} as a list.
        """
        self.assertEqual(
            status._parseCpuinfo(CPUINFO),
            {
                "processor": "1",
                "model name": "Example CPU @ 2.00GHz",
                "flags": ["fpu", "vme", "de", "pse"],
                "bugs": "",
            },
        )

    def test_cpuinfo(self) -> None:
        """
        C{status.cpuinfo} reads the real C{/proc/cpuinfo}.
        """
        result = status.cpuinfo()
        self.assertIn("processor", result)

    def test_missingProc(self) -> None:
        """
        A missing C{/proc} file is Salt's "was not found" error.
        """
        error = self.assertRaises(status.CommandExecutionError, status._read, "/proc/nope")
        self.assertEqual(str(error), "File /proc/nope was not found.")

    def test_threaded(self) -> None:
        """
        The functions read files, so none of them runs on the reactor.
        """
        for f in (status.uptime, status.loadavg, status.meminfo, status.cpuinfo):
            self.assertFalse(getattr(f, "runsOnReactor", False))
