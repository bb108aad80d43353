# -*- test-case-name: tests.test_modules_network -*-
"""
Tests for L{salttwist.modules.network}, against this machine's interfaces
and, for C{ping}, a stand-in C{ping} program.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from typing import Any

from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist import grains as coregrains
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    SaltInvocationError,
    network,
)


class InterfacesTests(SynchronousTestCase):
    """
    C{network.interfaces} and the address functions read the real
    interfaces.
    """

    def test_loopback(self) -> None:
        """
        C{lo} is up, has the zero hardware address and C{127.0.0.1/8}.
        """
        lo = network.interfaces()["lo"]
        self.assertTrue(lo["up"])
        self.assertEqual(lo["hwaddr"], "00:00:00:00:00:00")
        self.assertIn(
            {"address": "127.0.0.1", "netmask": "255.0.0.0", "broadcast": None, "label": "lo"},
            lo["inet"],
        )

    def test_shape(self) -> None:
        """
        Every interface has Salt's keys: C{up}; C{inet} records with
        C{address}, C{netmask}, C{broadcast}, C{label}; C{inet6} records
        with C{address}, C{prefixlen} (text) and C{scope}.
        """
        table = network.interfaces()
        self.assertEqual(sorted(table), sorted(os.listdir("/sys/class/net")))
        for name, data in table.items():
            self.assertIsInstance(data["up"], bool, name)
            for record in data.get("inet", []):
                self.assertEqual(sorted(record), ["address", "broadcast", "label", "netmask"])
                ipaddress.IPv4Address(record["address"])
            for record in data.get("inet6", []):
                self.assertEqual(sorted(record), ["address", "prefixlen", "scope"])
                ipaddress.IPv6Address(record["address"])
                self.assertTrue(record["prefixlen"].isdigit())
                self.assertIn(record["scope"], ("global", "link", "host", "site"))

    def test_fallbackAgrees(self) -> None:
        """
        The C{ioctl} and C{/proc/net/if_inet6} fallback finds the same
        primary IPv4 and the same IPv6 addresses as netlink.
        """
        viaNetlink = coregrains.interfaces()
        viaIoctl = coregrains.interfaces(useNetlink=False)
        self.assertEqual(sorted(viaNetlink), sorted(viaIoctl))
        for name, data in viaNetlink.items():
            if data.get("inet"):
                self.assertEqual(data["inet"][0], viaIoctl[name]["inet"][0], name)
            self.assertEqual(
                sorted(r["address"] for r in data.get("inet6", [])),
                sorted(r["address"] for r in viaIoctl[name].get("inet6", [])),
                name,
            )
            self.assertEqual(data.get("hwaddr"), viaIoctl[name].get("hwaddr"))

    def test_netlinkUnavailable(self) -> None:
        """
        When netlink fails, L{coregrains.interfaces} falls back to C{ioctl}.
        """

        def refuse() -> list[dict[str, Any]]:
            raise PermissionError(1, "Operation not permitted")

        self.patch(coregrains, "_netlinkAddresses", refuse)
        self.assertIn(
            "127.0.0.1", [r["address"] for r in coregrains.interfaces()["lo"].get("inet", [])]
        )

    def test_ipAddrs(self) -> None:
        """
        C{network.ip_addrs} leaves out loopback unless asked; C{cidr} and
        C{interface} filter.
        """
        self.assertNotIn("127.0.0.1", network.ip_addrs())
        self.assertIn("127.0.0.1", network.ip_addrs(include_loopback=True))
        self.assertEqual(network.ip_addrs(cidr="127.0.0.0/8", include_loopback=True), ["127.0.0.1"])
        self.assertEqual(network.ip_addrs("lo", include_loopback=True), ["127.0.0.1"])
        self.assertEqual(network.ip_addrs("no-such-interface"), [])
        self.assertRaises(SaltInvocationError, network.ip_addrs, cidr="not-a-net")

    def test_ipAddrsType(self) -> None:
        """
        C{type=private} and C{type=public} split the addresses.
        """
        everything = network.ip_addrs(include_loopback=True)
        private = network.ip_addrs(include_loopback=True, type="private")
        public = network.ip_addrs(include_loopback=True, type="public")
        self.assertEqual(sorted(private + public), sorted(everything))
        self.assertIn("127.0.0.1", private)

    def test_ipAddrs6(self) -> None:
        """
        C{network.ip_addrs6} leaves out C{::1} unless asked.
        """
        if not os.path.exists("/proc/net/if_inet6"):
            raise self.skipTest("no IPv6")
        self.assertNotIn("::1", network.ip_addrs6())
        self.assertIn("::1", network.ip_addrs6(include_loopback=True))
        self.assertEqual(network.ip_addrs6(cidr="::1/128", include_loopback=True), ["::1"])

    def test_ipAddressesSecondary(self) -> None:
        """
        Secondary addresses count, sorted as addresses (not as text).
        """
        table = {
            "eth0": {
                "inet": [{"address": "10.0.0.10"}],
                "secondary": [{"type": "inet", "address": "10.0.0.9"}],
            },
            "lo": {"inet": [{"address": "127.0.0.1"}]},
        }
        self.assertEqual(coregrains.ipAddresses(table), ["10.0.0.9", "10.0.0.10"])

    def test_hwaddr(self) -> None:
        """
        C{network.hwaddr} is the interface's MAC address; an unknown
        interface gets Salt's message naming those there are.
        """
        self.assertEqual(network.hwaddr("lo"), "00:00:00:00:00:00")
        message = network.hwaddr("nope0")
        self.assertTrue(message.startswith('Interface "nope0" not in available interfaces: "'))
        self.assertIn('"lo"', message)

    def test_fqdn(self) -> None:
        """
        C{network.fqdn} and C{network.get_fqdn} are the C{fqdn} grain.
        """
        self.assertEqual(network.fqdn(), coregrains.fqdnGrains()["fqdn"])
        self.assertEqual(network.get_fqdn(), network.fqdn())
        self.assertTrue(network.fqdn())

    def test_threaded(self) -> None:
        """
        Reading interfaces and names blocks, so those functions run in a
        thread; C{ping} spawns on the reactor.
        """
        for f in (network.interfaces, network.ip_addrs, network.hwaddr, network.fqdn):
            self.assertFalse(getattr(f, "runsOnReactor", False))
        self.assertTrue(network.ping.runsOnReactor)


class PingTests(TestCase):
    """
    C{network.ping} runs C{ping -c N} through the reactor (here a stand-in
    C{ping} first on C{PATH}).
    """

    def setUp(self) -> None:
        """
        A directory with a fake C{ping} that echoes its arguments and fails
        for the host C{unreachable.invalid}, put first on C{PATH}.
        """
        from twisted.internet import reactor

        self.context = LoaderContext(opts={}, grains={}, reactor=reactor)
        self.bin = os.path.abspath(self.mktemp())
        os.makedirs(self.bin)
        with open(os.path.join(self.bin, "ping"), "w") as f:
            f.write(
                "#!/bin/sh\n"
                'echo "ping $*"\n'
                "for last; do :; done\n"
                '[ "$last" = unreachable.invalid ] && exit 2\n'
                "exit 0\n"
            )
        os.chmod(os.path.join(self.bin, "ping"), 0o755)
        environ = dict(os.environ)
        environ["PATH"] = self.bin + os.pathsep + environ.get("PATH", "")
        self.patch(os, "environ", environ)

    async def test_ping(self) -> None:
        """
        C{network.ping} runs C{ping -c 4 host} and returns its output with
        its exit code as the retcode.
        """
        self.assertEqual(
            await network.ping(self.context, "127.0.0.1"), Retcode("ping -c 4 127.0.0.1", 0)
        )
        self.assertEqual(
            await network.ping(self.context, "unreachable.invalid"),
            Retcode("ping -c 4 unreachable.invalid", 2),
        )

    async def test_options(self) -> None:
        """
        C{count} and C{timeout} become C{-c} and C{-W}.
        """
        value = await network.ping(self.context, "h.example", timeout=1, count=2)
        self.assertEqual(value.value, "ping -c 2 -W 1 h.example")

    async def test_returnBoolean(self) -> None:
        """
        C{return_boolean=True} returns whether the host answered.
        """
        self.assertIs(await network.ping(self.context, "h.example", return_boolean=True), True)
        self.assertIs(
            await network.ping(self.context, "unreachable.invalid", return_boolean=True), False
        )

    def test_badHost(self) -> None:
        """
        A host that would be read as an option, or has spaces, is refused,
        and so are a C{timeout} or C{count} that are not numbers.
        """
        for host in ("-f", "a b", ""):
            self.assertRaises(SaltInvocationError, network.ping, self.context, host)
        self.assertRaises(SaltInvocationError, network.ping, self.context, "h", timeout="x")
        self.assertRaises(SaltInvocationError, network.ping, self.context, "h", count="x")

    def test_noPing(self) -> None:
        """
        Without a C{ping} program, the error says so.
        """
        self.patch(os, "environ", {"PATH": self.bin + "-empty"})
        error = self.assertRaises(CommandExecutionError, network.ping, self.context, "h")
        self.assertIn("ping is not installed", str(error))


class NetlinkParsingTests(SynchronousTestCase):
    """
    The netlink address messages are decoded.
    """

    def test_parseAddrMessage(self) -> None:
        """
        An C{ifaddrmsg} with C{IFA_LOCAL}, C{IFA_LABEL} and
        C{IFA_BROADCAST} attributes decodes into its fields.
        """

        def attr(kind: int, value: bytes) -> bytes:
            padded = value + b"\0" * (-len(value) % 4)
            return struct.pack("=HH", 4 + len(value), kind) + padded

        body = struct.pack("=BBBBI", socket.AF_INET, 24, 0x80, 0, 3)
        body += attr(1, socket.inet_aton("10.1.2.3"))
        body += attr(2, socket.inet_aton("10.1.2.3"))
        body += attr(3, b"eth0:1\0")
        body += attr(4, socket.inet_aton("10.1.2.255"))
        self.assertEqual(
            coregrains._parseAddrMessage(body),
            {
                "family": socket.AF_INET,
                "prefixlen": 24,
                "flags": 0x80,
                "scope": 0,
                "index": 3,
                "address": "10.1.2.3",
                "local": "10.1.2.3",
                "label": "eth0:1",
                "broadcast": "10.1.2.255",
            },
        )
