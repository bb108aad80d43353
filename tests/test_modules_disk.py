# -*- test-case-name: tests.test_modules_disk -*-
"""
Tests for L{salttwist.modules.disk}: parsing C{df -P}, and the real C{df}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.modules import CommandExecutionError, LoaderContext, disk

DF_OUTPUT = """\
Filesystem              1024-blocks     Used Available Capacity Mounted on
/dev/vda                  264212084 22748464  83642448      22% /
tmpfs                      24684084        0  24684084       0% /dev/shm
/dev/mapper/very-long-volume-group-name-root
                           10000000  5000000   5000000      50% /srv
//server/share name          100       50        50      50% /mnt/my share
"""


class ParseTests(SynchronousTestCase):
    """
    L{disk._parseDf} reads C{df -P} as Salt does.
    """

    def test_shape(self) -> None:
        """
        Each mount point maps to Salt's keys, values kept as text.
        """
        parsed = disk._parseDf(DF_OUTPUT)
        self.assertEqual(
            parsed["/"],
            {
                "filesystem": "/dev/vda",
                "1K-blocks": "264212084",
                "used": "22748464",
                "available": "83642448",
                "capacity": "22%",
            },
        )
        self.assertEqual(parsed["/dev/shm"]["capacity"], "0%")

    def test_wrappedDevice(self) -> None:
        """
        A device name too long for its column, wrapped onto a line of its
        own, is joined to the next line.
        """
        parsed = disk._parseDf(DF_OUTPUT)
        self.assertEqual(
            parsed["/srv"]["filesystem"], "/dev/mapper/very-long-volume-group-name-root"
        )
        self.assertEqual(parsed["/srv"]["used"], "5000000")

    def test_spaces(self) -> None:
        """
        Spaces in the device name and the mount point are kept.
        """
        parsed = disk._parseDf(DF_OUTPUT)
        self.assertEqual(parsed["/mnt/my share"]["filesystem"], "//server/share name")

    def test_flags(self) -> None:
        """
        Only the C{df} flags Salt allows pass; others are refused.
        """
        self.assertEqual(disk._cleanFlags(None, "disk.usage"), "")
        self.assertEqual(disk._cleanFlags("-a", "disk.usage"), "a")
        self.assertEqual(disk._cleanFlags("ai", "disk.usage"), "ai")
        error = self.assertRaises(CommandExecutionError, disk._cleanFlags, "a;rm", "disk.usage")
        self.assertEqual(str(error), "Invalid flag passed to disk.usage")


class UsageTests(TestCase):
    """
    C{disk.usage} runs the real C{df} through the reactor.
    """

    def setUp(self) -> None:
        """
        A context on the real reactor.
        """
        from twisted.internet import reactor

        self.context = LoaderContext(opts={}, grains={}, reactor=reactor)

    async def test_root(self) -> None:
        """
        The root filesystem is listed with numeric sizes and a percentage.
        """
        usage = await disk.usage(self.context)
        self.assertIn("/", usage)
        self.assertTrue(usage["/"]["1K-blocks"].isdigit())
        self.assertTrue(usage["/"]["capacity"].endswith("%"))

    async def test_all(self) -> None:
        """
        C{args=a} lists at least as many filesystems (C{/proc} among them).
        """
        usage = await disk.usage(self.context)
        everything = await disk.usage(self.context, args="a")
        self.assertGreaterEqual(len(everything), len(usage))
        self.assertIn("/proc", everything)

    def test_onReactor(self) -> None:
        """
        C{disk.usage} spawns C{df} from the reactor.
        """
        self.assertTrue(disk.usage.runsOnReactor)
