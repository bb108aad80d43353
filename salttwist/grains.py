# -*- test-case-name: tests.test_grains -*-
"""
Core grains: facts about the machine the minion runs on, read from
C{/proc}, C{/sys}, C{/etc/os-release} and the kernel (netlink), with no
external programs or packages.

Also the interface table that Salt's C{network} module and the C{ipv4},
C{ipv6} and C{hwaddr_interfaces} grains share (L{interfaces}).

Precedence, as in Salt: core grains, then the grains file (C{grains} next
to the minion's config file, written by C{grains.setval}), then the
C{grains:} of the minion config on top.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import platform
import socket
import struct
import sys
from typing import Any

import yaml
from twisted.logger import Logger

import salttwist

log = Logger()

#: Salt's C{os} grain for an C{/etc/os-release} C{ID}.
_OS_NAMES = {
    "debian": "Debian",
    "ubuntu": "Ubuntu",
    "raspbian": "Raspbian",
    "linuxmint": "Mint",
    "devuan": "Devuan",
    "kali": "Kali",
    "pop": "Pop",
    "neon": "KDE neon",
    "centos": "CentOS",
    "rhel": "RedHat",
    "fedora": "Fedora",
    "rocky": "Rocky",
    "almalinux": "AlmaLinux",
    "ol": "OEL",
    "amzn": "Amazon",
    "cloudlinux": "CloudLinux",
    "scientific": "ScientificLinux",
    "sles": "SUSE",
    "opensuse": "SUSE",
    "opensuse-leap": "SUSE",
    "opensuse-tumbleweed": "SUSE",
    "arch": "Arch",
    "archarm": "Arch ARM",
    "manjaro": "Manjaro",
    "endeavouros": "EndeavourOS",
    "gentoo": "Gentoo",
    "alpine": "Alpine",
    "void": "Void",
    "photon": "VMware Photon OS",
}

#: Salt's C{os_family} for an C{os}; an C{os} not listed is its own family.
_OS_FAMILIES = {
    "Ubuntu": "Debian",
    "Raspbian": "Debian",
    "Mint": "Debian",
    "Devuan": "Debian",
    "Kali": "Debian",
    "Pop": "Debian",
    "KDE neon": "Debian",
    "CentOS": "RedHat",
    "Fedora": "RedHat",
    "Rocky": "RedHat",
    "AlmaLinux": "RedHat",
    "OEL": "RedHat",
    "Amazon": "RedHat",
    "CloudLinux": "RedHat",
    "ScientificLinux": "RedHat",
    "VMware Photon OS": "RedHat",
    "SUSE": "Suse",
    "Arch ARM": "Arch",
    "Manjaro": "Arch",
    "EndeavourOS": "Arch",
}

#: C{ID_LIKE} words, for distributions missing from L{_OS_NAMES}.
_LIKE_FAMILIES = {
    "debian": "Debian",
    "ubuntu": "Debian",
    "rhel": "RedHat",
    "fedora": "RedHat",
    "centos": "RedHat",
    "suse": "Suse",
    "arch": "Arch",
}

# Netlink (linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h).
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_RTM_GETADDR = 22
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
_IFA_ADDRESS = 1
_IFA_LOCAL = 2
_IFA_LABEL = 3
_IFA_BROADCAST = 4
_IFA_FLAGS = 8
_IFA_F_SECONDARY = 0x01
_SCOPES = {0: "global", 200: "site", 253: "link", 254: "host", 255: "nowhere"}
# /proc/net/if_inet6 scopes (IPV6_ADDR_SCOPE_MASK bits).
_INET6_SCOPES = {0x00: "global", 0x10: "host", 0x20: "link", 0x40: "site"}
_IFF_UP = 0x1
_SIOCGIFADDR = 0x8915
_SIOCGIFBRDADDR = 0x8919
_SIOCGIFNETMASK = 0x891B


def _readFile(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _osRelease(path: str = "/etc/os-release") -> dict[str, str]:
    """
    Parse C{os-release}: C{KEY=value} lines, values optionally quoted.
    """
    values: dict[str, str] = {}
    text = _readFile(path)
    if text is None and path == "/etc/os-release":
        text = _readFile("/usr/lib/os-release")
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            values[key] = value
    return values


def osGrains(release: dict[str, str]) -> dict[str, Any]:
    """
    @param release: the parsed C{/etc/os-release}.
    @return: C{os}, C{os_family}, C{osfullname}, C{osrelease},
        C{osmajorrelease}, C{oscodename} and C{osfinger}, named as Salt
        names them.
    """
    distId = release.get("ID", "").lower()
    if distId in _OS_NAMES:
        osName = _OS_NAMES[distId]
    elif release.get("NAME"):
        osName = release["NAME"].split()[0]
    else:
        osName = platform.system()
    family = _OS_FAMILIES.get(osName, osName)
    if distId not in _OS_NAMES:
        for like in release.get("ID_LIKE", "").lower().split():
            if like in _LIKE_FAMILIES:
                family = _LIKE_FAMILIES[like]
                break
    osrelease = release.get("VERSION_ID", "")
    major = osrelease.split(".")[0]
    grains: dict[str, Any] = {
        "os": osName,
        "os_family": family,
        "osfullname": release.get("NAME", osName),
        "osrelease": osrelease,
        "oscodename": release.get("VERSION_CODENAME", ""),
        # Salt's osfinger: Debian-12, CentOS-7, but Ubuntu-22.04.
        "osfinger": f"{osName}-{osrelease if osName == 'Ubuntu' else major}" if major else "",
    }
    if major.isdigit():
        grains["osmajorrelease"] = int(major)
    return grains


def _memTotalMiB() -> int:
    """
    C{MemTotal} of C{/proc/meminfo} in MiB, as Salt's C{mem_total}.
    """
    for line in (_readFile("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 0


def _cpuModel() -> str:
    for line in (_readFile("/proc/cpuinfo") or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("model name", "Processor", "cpu model"):
            return value.strip()
    return ""


def _machineId() -> str:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        text = _readFile(path)
        if text and text.strip():
            return text.strip()
    return ""


def _interfaceNames() -> list[str]:
    try:
        return sorted(os.listdir("/sys/class/net"))
    except OSError:
        return sorted(name for _, name in socket.if_nameindex())


def _linkInfo(name: str) -> dict[str, Any]:
    """
    C{up} and C{hwaddr} of one interface, from C{/sys/class/net}.
    """
    info: dict[str, Any] = {}
    flags = _readFile(f"/sys/class/net/{name}/flags")
    try:
        info["up"] = bool(int(flags.strip(), 16) & _IFF_UP) if flags else False
    except ValueError:
        info["up"] = False
    address = (_readFile(f"/sys/class/net/{name}/address") or "").strip()
    if address:
        info["hwaddr"] = address
    return info


def _cidrToNetmask(prefixlen: int) -> str:
    return str(ipaddress.IPv4Network(f"0.0.0.0/{prefixlen}").netmask)


def _netlinkAddresses() -> list[dict[str, Any]]:
    """
    Every address the kernel has, through an C{RTM_GETADDR} netlink dump.

    @return: maps with C{family}, C{index}, C{prefixlen}, C{scope},
        C{flags}, and C{address}, C{local}, C{label}, C{broadcast} when the
        kernel gave them.
    @raise OSError: netlink is not available.
    """
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    try:
        sock.settimeout(2.0)
        sock.bind((0, 0))
        request = struct.pack("=IHHII", 0, _RTM_GETADDR, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)
        request += struct.pack("=BBBBI", socket.AF_UNSPEC, 0, 0, 0, 0)
        request = struct.pack("=I", len(request)) + request[4:]
        sock.send(request)
        found: list[dict[str, Any]] = []
        while True:
            data = sock.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length, kind, _, _, _ = struct.unpack_from("=IHHII", data, offset)
                if length < 16:
                    return found
                if kind == _NLMSG_DONE:
                    return found
                if kind == _NLMSG_ERROR:
                    (errno,) = struct.unpack_from("=i", data, offset + 16)
                    raise OSError(-errno, "netlink RTM_GETADDR failed")
                found.append(_parseAddrMessage(data[offset + 16 : offset + length]))
                offset += (length + 3) & ~3
    finally:
        sock.close()


def _parseAddrMessage(body: bytes) -> dict[str, Any]:
    family, prefixlen, flags, scope, index = struct.unpack_from("=BBBBI", body, 0)
    entry: dict[str, Any] = {
        "family": family,
        "prefixlen": prefixlen,
        "flags": flags,
        "scope": scope,
        "index": index,
    }
    offset = 8
    while offset + 4 <= len(body):
        length, kind = struct.unpack_from("=HH", body, offset)
        if length < 4:
            break
        value = body[offset + 4 : offset + length]
        if kind in (_IFA_ADDRESS, _IFA_LOCAL, _IFA_BROADCAST):
            name = {_IFA_ADDRESS: "address", _IFA_LOCAL: "local", _IFA_BROADCAST: "broadcast"}
            entry[name[kind]] = socket.inet_ntop(family, value)
        elif kind == _IFA_LABEL:
            entry["label"] = value.rstrip(b"\0").decode("utf-8", "replace")
        elif kind == _IFA_FLAGS and len(value) >= 4:
            (entry["flags"],) = struct.unpack_from("=I", value)
        offset += (length + 3) & ~3
    return entry


def _addressesFromNetlink(table: dict[str, dict[str, Any]]) -> None:
    names = {index: name for index, name in socket.if_nameindex()}
    for entry in _netlinkAddresses():
        name = names.get(entry["index"])
        if name is None:
            continue
        data = table.setdefault(name, {"up": False})
        if entry["family"] == socket.AF_INET:
            record = {
                "address": entry.get("local", entry.get("address")),
                "netmask": _cidrToNetmask(entry["prefixlen"]),
                "broadcast": entry.get("broadcast"),
                "label": entry.get("label", name),
            }
            if entry["flags"] & _IFA_F_SECONDARY:
                data.setdefault("secondary", []).append({"type": "inet", **record})
            else:
                data.setdefault("inet", []).append(record)
        elif entry["family"] == socket.AF_INET6:
            data.setdefault("inet6", []).append(
                {
                    "address": entry.get("address", entry.get("local")),
                    "prefixlen": str(entry["prefixlen"]),
                    "scope": _SCOPES.get(entry["scope"], str(entry["scope"])),
                }
            )


def _ioctlAddress(sock: socket.socket, name: str, request: int) -> str | None:
    try:
        packed = fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))
    except OSError:
        return None
    return socket.inet_ntoa(packed[20:24])


def _addressesFromIoctl(table: dict[str, dict[str, Any]]) -> None:
    """
    The fallback without netlink: the primary IPv4 address of each
    interface by C{ioctl}, and IPv6 from C{/proc/net/if_inet6}.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for name, data in table.items():
            address = _ioctlAddress(sock, name, _SIOCGIFADDR)
            if address is None:
                continue
            netmask = _ioctlAddress(sock, name, _SIOCGIFNETMASK)
            broadcast = _ioctlAddress(sock, name, _SIOCGIFBRDADDR)
            data["inet"] = [
                {
                    "address": address,
                    "netmask": netmask,
                    "broadcast": broadcast if broadcast not in (None, "0.0.0.0") else None,
                    "label": name,
                }
            ]
    finally:
        sock.close()
    for line in (_readFile("/proc/net/if_inet6") or "").splitlines():
        fields = line.split()
        if len(fields) != 6 or fields[5] not in table:
            continue
        address = str(ipaddress.IPv6Address(bytes.fromhex(fields[0])))
        scope = int(fields[3], 16)
        table[fields[5]].setdefault("inet6", []).append(
            {
                "address": address,
                "prefixlen": str(int(fields[2], 16)),
                "scope": _INET6_SCOPES.get(scope & 0xF0, "global"),
            }
        )


def interfaces(useNetlink: bool = True) -> dict[str, dict[str, Any]]:
    """
    The network interfaces, in the shape of Salt's C{network.interfaces}
    on Linux: C{{name: {"up", "hwaddr", "inet": [{"address", "netmask",
    "broadcast", "label"}], "inet6": [{"address", "prefixlen", "scope"}],
    "secondary": [...]}}}. Blocking (reads C{/sys} and asks the kernel).

    @param useNetlink: C{False} forces the C{ioctl} and
        C{/proc/net/if_inet6} fallback, which sees only each interface's
        primary IPv4 address.
    """
    table = {name: _linkInfo(name) for name in _interfaceNames()}
    if useNetlink:
        try:
            _addressesFromNetlink(table)
            return table
        except OSError as e:
            log.debug("netlink unavailable ({error}); using ioctl", error=e)
    _addressesFromIoctl(table)
    return table


def ipAddresses(
    ifaces: dict[str, dict[str, Any]],
    proto: str = "inet",
    interface: str | None = None,
    includeLoopback: bool = False,
) -> list[str]:
    """
    The addresses of C{proto} (C{"inet"} or C{"inet6"}) in an interface
    table, secondary ones included, sorted as Salt sorts them.
    """
    found = set()
    for name, data in ifaces.items():
        if interface is not None and name != interface:
            continue
        records = list(data.get(proto, []))
        records += [r for r in data.get("secondary", []) if r.get("type") == proto]
        for record in records:
            try:
                address = ipaddress.ip_address(record["address"])
            except (KeyError, ValueError):
                continue
            if includeLoopback or not address.is_loopback:
                found.add(address)
    return [str(a) for a in sorted(found)]


def networkGrains(ifaces: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """
    C{ipv4}, C{ipv6}, C{hwaddr_interfaces} and C{ip_interfaces},
    C{ip4_interfaces}, C{ip6_interfaces}, as Salt computes them.
    """
    grains: dict[str, Any] = {
        "ipv4": ipAddresses(ifaces, "inet", includeLoopback=True),
        "ipv6": ipAddresses(ifaces, "inet6", includeLoopback=True),
        "hwaddr_interfaces": {n: d["hwaddr"] for n, d in ifaces.items() if "hwaddr" in d},
        "ip4_interfaces": {},
        "ip6_interfaces": {},
        "ip_interfaces": {},
    }
    for name in ifaces:
        four = ipAddresses(ifaces, "inet", name, includeLoopback=True)
        six = ipAddresses(ifaces, "inet6", name, includeLoopback=True)
        grains["ip4_interfaces"][name] = four
        grains["ip6_interfaces"][name] = six
        grains["ip_interfaces"][name] = four + six
    return grains


def grainsFilePath(opts: dict[str, Any]) -> str:
    """
    @return: the minion's grains file, C{grains} next to its config file,
        where Salt keeps it.
    """
    return os.path.join(os.path.dirname(opts["conf_file"]), "grains")


def readGrainsFile(path: str | None) -> dict[str, Any]:
    """
    Load the grains file: a YAML map. A missing file is empty; a broken
    one is logged and ignored, as Salt does. Blocking.
    """
    if not path:
        return {}
    try:
        with open(path, "rb") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as e:
        log.error("Failed to load grains defined in grain file {path}: {error}", path=path, error=e)
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        log.error("Grains file {path} is not a map; ignored", path=path)
        return {}
    return data


_LOCAL_NAMES = (
    "localhost",
    "localhost.localdomain",
    "localhost.my.domain",
    "localhost4.localdomain4",
    "ip6-localhost",
    "ip6-loopback",
)


def getFqdn() -> str:
    """
    The host's fully qualified name as Salt finds it: C{socket.getfqdn()}
    and the canonical names of the host name, a real name preferred to a
    C{localhost} alias and a dotted name to a bare one. May block on DNS.
    """
    candidates = [socket.getfqdn()]
    try:
        infos = socket.getaddrinfo(
            socket.gethostname(), 0, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_CANONNAME
        )
        candidates += [info[3] for info in infos if info[3]]
    except OSError:
        pass
    names = [n for i, n in enumerate(candidates) if n and n not in candidates[:i]]
    names.sort(key=lambda n: (n in _LOCAL_NAMES or _isAddress(n), "." not in n))
    return names[0] if names else "localhost"


def _isAddress(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def fqdnGrains() -> dict[str, str]:
    """
    C{fqdn}, C{host}, C{domain}, C{localhost} and C{nodename}; resolving
    the name may block on DNS.
    """
    fqdn = getFqdn()
    host, _, domain = fqdn.partition(".")
    return {
        "fqdn": fqdn,
        "host": host,
        "domain": domain,
        "localhost": socket.gethostname(),
        "nodename": platform.node(),
    }


def _versionInfo(version: str) -> list[int | str]:
    """
    @return: C{version} as Salt's C{saltversioninfo}: its dotted parts,
        numbers as integers.
    """
    return [int(p) if p.isdigit() else p for p in version.split(".")]


def coreGrains(
    minionId: str, configGrains: dict[str, Any], grainsFile: str | None = None
) -> dict[str, Any]:
    """
    Gather the core grains (blocking: called once at start), then the
    grains file on top, then the C{grains:} of the minion config on top of
    both (Salt's order).

    @param minionId: the C{id} grain.
    @param configGrains: the C{grains} option of the minion config.
    @param grainsFile: the grains file's path (see L{grainsFilePath}), or
        L{None} for none.
    """
    grains: dict[str, Any] = {
        "id": minionId,
        "kernel": platform.system(),
        "kernelrelease": platform.release(),
        "kernelversion": platform.version(),
        "cpuarch": platform.machine(),
        "cpu_model": _cpuModel(),
        "num_cpus": os.cpu_count() or 1,
        "mem_total": _memTotalMiB(),
        "machine_id": _machineId(),
        "pythonversion": list(sys.version_info),
        "pythonexecutable": sys.executable,
        # Salt's states and targets read saltversion: it holds the version
        # of the software answering as Salt's minion, salttwist's, which
        # salttwistversion names plainly.
        "salttwistversion": salttwist.__version__,
        "salttwistversioninfo": _versionInfo(salttwist.__version__),
        "saltversion": salttwist.__version__,
        "saltversioninfo": _versionInfo(salttwist.__version__),
    }
    grains.update(osGrains(_osRelease()))
    grains.update(fqdnGrains())
    grains.update(networkGrains(interfaces()))
    grains.update(readGrainsFile(grainsFile))
    grains.update(configGrains)
    return grains
