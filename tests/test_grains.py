# -*- test-case-name: tests.test_grains -*-
"""
Tests for L{salttwist.grains}: the core grains, read from this
machine, and the grains file and config layered on them.
"""

from __future__ import annotations

import os
import platform
import socket
import sys

from twisted.internet.testing import EventLoggingObserver
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

import salttwist
from salttwist import grains


class CoreGrainsTests(SynchronousTestCase):
    """
    L{grains.coreGrains} gathers the grains Salt's core grains have.
    """

    def setUp(self) -> None:
        """
        Gather the grains once.
        """
        self.grains = grains.coreGrains("web1", {})

    def test_keys(self) -> None:
        """
        Every core grain the issue names is there.
        """
        for name in (
            "id",
            "os",
            "os_family",
            "osrelease",
            "oscodename",
            "kernel",
            "kernelrelease",
            "cpuarch",
            "num_cpus",
            "mem_total",
            "fqdn",
            "host",
            "domain",
            "ipv4",
            "ipv6",
            "hwaddr_interfaces",
            "machine_id",
            "pythonversion",
            "saltversion",
        ):
            self.assertIn(name, self.grains)

    def test_values(self) -> None:
        """
        The grains agree with the machine: the id given, the kernel, the
        architecture, the CPU count, Python's version as Salt's list, and
        salttwist's version.
        """
        g = self.grains
        self.assertEqual(g["id"], "web1")
        self.assertEqual(g["kernel"], platform.system())
        self.assertEqual(g["kernelrelease"], platform.release())
        self.assertEqual(g["cpuarch"], platform.machine())
        self.assertEqual(g["num_cpus"], os.cpu_count())
        self.assertEqual(g["pythonversion"], list(sys.version_info))
        self.assertEqual(g["saltversion"], salttwist.__version__)

    def test_versionGrains(self) -> None:
        """
        C{salttwistversion} and C{salttwistversioninfo} name salttwist's
        version; C{saltversion} and C{saltversioninfo}, which Salt's
        states and targets read, hold the same (the version of the
        software answering as Salt's minion, not a Salt release).
        """
        g = self.grains
        info = [int(p) if p.isdigit() else p for p in salttwist.__version__.split(".")]
        self.assertEqual(g["salttwistversion"], salttwist.__version__)
        self.assertEqual(g["salttwistversioninfo"], info)
        self.assertEqual(g["saltversion"], g["salttwistversion"])
        self.assertEqual(g["saltversioninfo"], g["salttwistversioninfo"])

    def test_memTotal(self) -> None:
        """
        C{mem_total} is C{MemTotal} in MiB, as Salt computes it.
        """
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
        self.assertEqual(self.grains["mem_total"], kib // 1024)

    def test_machineId(self) -> None:
        """
        C{machine_id} is C{/etc/machine-id}.
        """
        if not os.path.exists("/etc/machine-id"):
            raise self.skipTest("no /etc/machine-id")
        with open("/etc/machine-id") as f:
            self.assertEqual(self.grains["machine_id"], f.read().strip())

    def test_names(self) -> None:
        """
        C{host} and C{domain} are the two halves of C{fqdn}.
        """
        g = self.grains
        self.assertEqual(g["fqdn"], f"{g['host']}.{g['domain']}" if g["domain"] else g["host"])
        self.assertEqual(g["localhost"], socket.gethostname())

    def test_network(self) -> None:
        """
        C{ipv4} and C{ipv6} list every address, loopback included, and
        C{hwaddr_interfaces} maps interfaces to MAC addresses.
        """
        self.assertIn("127.0.0.1", self.grains["ipv4"])
        self.assertEqual(self.grains["hwaddr_interfaces"]["lo"], "00:00:00:00:00:00")
        self.assertEqual(self.grains["ip4_interfaces"]["lo"], ["127.0.0.1"])
        if os.path.exists("/proc/net/if_inet6"):
            self.assertIn("::1", self.grains["ipv6"])

    def test_osFromRelease(self) -> None:
        """
        The C{os} grains come from C{/etc/os-release}.
        """
        release = grains._osRelease()
        if not release:
            raise self.skipTest("no os-release")
        self.assertEqual(self.grains["osrelease"], release.get("VERSION_ID", ""))
        self.assertEqual(self.grains["oscodename"], release.get("VERSION_CODENAME", ""))


class OsGrainsTests(SynchronousTestCase):
    """
    L{grains.osGrains} names distributions as Salt does.
    """

    def test_debian(self) -> None:
        """
        Debian 12 is C{Debian}, family C{Debian}, finger C{Debian-12}.
        """
        g = grains.osGrains(
            {
                "ID": "debian",
                "NAME": "Debian GNU/Linux",
                "VERSION_ID": "12",
                "VERSION_CODENAME": "bookworm",
            }
        )
        self.assertEqual(
            g,
            {
                "os": "Debian",
                "os_family": "Debian",
                "osfullname": "Debian GNU/Linux",
                "osrelease": "12",
                "oscodename": "bookworm",
                "osfinger": "Debian-12",
                "osmajorrelease": 12,
            },
        )

    def test_ubuntu(self) -> None:
        """
        Ubuntu is of the Debian family, and its finger keeps the full
        release.
        """
        g = grains.osGrains(
            {
                "ID": "ubuntu",
                "NAME": "Ubuntu",
                "VERSION_ID": "22.04",
                "ID_LIKE": "debian",
                "VERSION_CODENAME": "jammy",
            }
        )
        self.assertEqual(
            (g["os"], g["os_family"], g["osfinger"]), ("Ubuntu", "Debian", "Ubuntu-22.04")
        )
        self.assertEqual(g["osmajorrelease"], 22)

    def test_redhatFamily(self) -> None:
        """
        Rocky, CentOS and RHEL are of the C{RedHat} family.
        """
        for distId, name in (("rocky", "Rocky"), ("centos", "CentOS"), ("rhel", "RedHat")):
            g = grains.osGrains({"ID": distId, "VERSION_ID": "9.3"})
            self.assertEqual((g["os"], g["os_family"]), (name, "RedHat"))

    def test_unknownWithIdLike(self) -> None:
        """
        An unknown distribution takes the first word of its C{NAME}, and
        its family from C{ID_LIKE}.
        """
        g = grains.osGrains({"ID": "zorin", "NAME": "Zorin OS", "ID_LIKE": "ubuntu debian"})
        self.assertEqual((g["os"], g["os_family"]), ("Zorin", "Debian"))
        self.assertNotIn("osmajorrelease", g)

    def test_parseOsRelease(self) -> None:
        """
        C{os-release} values may be double- or single-quoted or bare;
        comments and blank lines are skipped.
        """
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("# comment\n\nNAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID='12'\n")
        self.assertEqual(
            grains._osRelease(path),
            {"NAME": "Debian GNU/Linux", "ID": "debian", "VERSION_ID": "12"},
        )


class LayeringTests(SynchronousTestCase):
    """
    The grains file goes over the core grains, the config's C{grains:}
    over both, as in Salt.
    """

    def writeFile(self, text: str) -> str:
        """
        @return: the path of a grains file holding C{text}.
        """
        path = self.mktemp()
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_order(self) -> None:
        """
        A grain in the file overrides a core grain; the config overrides
        the file.
        """
        path = self.writeFile("os: FromFile\nrole: file-role\nrack: r1\n")
        g = grains.coreGrains("m1", {"role": "config-role"}, path)
        self.assertEqual((g["os"], g["role"], g["rack"]), ("FromFile", "config-role", "r1"))

    def test_missingFile(self) -> None:
        """
        A missing grains file adds nothing.
        """
        g = grains.coreGrains("m1", {}, self.mktemp())
        self.assertEqual(g["id"], "m1")

    def test_brokenFile(self) -> None:
        """
        A grains file that is not YAML, or not a map, is logged and
        ignored.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        for text in ("a: [unclosed\n", "- just\n- a list\n"):
            self.assertEqual(grains.readGrainsFile(self.writeFile(text)), {})
        self.assertEqual(len([e for e in events if "grain" in e["log_format"].lower()]), 2)
        self.assertEqual(grains.readGrainsFile(self.writeFile("")), {})
        self.assertEqual(grains.readGrainsFile(None), {})

    def test_filePath(self) -> None:
        """
        The grains file is next to the minion's config file.
        """
        self.assertEqual(
            grains.grainsFilePath({"conf_file": "/etc/salttwist/minion"}), "/etc/salttwist/grains"
        )


class NetworkGrainsTests(SynchronousTestCase):
    """
    L{grains.networkGrains} derives the address grains from an interface
    table.
    """

    def test_derived(self) -> None:
        """
        Addresses are sorted, loopback included; interfaces without a MAC
        have no C{hwaddr_interfaces} entry.
        """
        table = {
            "lo": {
                "hwaddr": "00:00:00:00:00:00",
                "inet": [{"address": "127.0.0.1"}],
                "inet6": [{"address": "::1"}],
            },
            "eth0": {
                "hwaddr": "02:00:00:00:00:01",
                "inet": [{"address": "10.0.0.20"}],
                "secondary": [{"type": "inet", "address": "10.0.0.3"}],
                "inet6": [{"address": "fe80::1"}],
            },
            "tun0": {"inet": [{"address": "192.0.2.1"}]},
        }
        g = grains.networkGrains(table)
        self.assertEqual(g["ipv4"], ["10.0.0.3", "10.0.0.20", "127.0.0.1", "192.0.2.1"])
        self.assertEqual(g["ipv6"], ["::1", "fe80::1"])
        self.assertEqual(
            g["hwaddr_interfaces"], {"lo": "00:00:00:00:00:00", "eth0": "02:00:00:00:00:01"}
        )
        self.assertEqual(g["ip_interfaces"]["eth0"], ["10.0.0.3", "10.0.0.20", "fe80::1"])


class FqdnTests(SynchronousTestCase):
    """
    L{grains.getFqdn} prefers a real, dotted name.
    """

    def test_preferDotted(self) -> None:
        """
        A dotted canonical name beats C{localhost} and a bare name.
        """
        self.patch(socket, "getfqdn", lambda: "localhost")
        self.patch(socket, "gethostname", lambda: "web1")
        self.patch(
            socket,
            "getaddrinfo",
            lambda *a, **k: [(0, 0, 0, "web1", ()), (0, 0, 0, "web1.example.com", ())],
        )
        self.assertEqual(grains.getFqdn(), "web1.example.com")

    def test_resolverFails(self) -> None:
        """
        When the name does not resolve, C{socket.getfqdn} is used.
        """

        def fail(*a: object, **k: object) -> list[object]:
            raise socket.gaierror(-2, "Name or service not known")

        self.patch(socket, "getfqdn", lambda: "web2")
        self.patch(socket, "getaddrinfo", fail)
        self.assertEqual(grains.getFqdn(), "web2")
