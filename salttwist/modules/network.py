# -*- test-case-name: tests.test_modules_network -*-
"""
Salt's C{network} module on Linux: interfaces and addresses (read from
C{/sys} and the kernel's netlink socket, no C{ip} command needed), the
host's name, and C{ping}.
"""

from __future__ import annotations

import ipaddress
import shutil
from typing import Any

from twisted.internet.defer import Deferred

from salttwist.grains import getFqdn, ipAddresses
from salttwist.grains import interfaces as _interfaceTable
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    SaltInvocationError,
    needsContext,
    onReactor,
)
from salttwist.modules._process import runCommand


def interfaces() -> dict[str, dict[str, Any]]:
    """
    Return every network interface: C{{name: {"up", "hwaddr", "inet":
    [{"address", "netmask", "broadcast", "label"}], "inet6": [{"address",
    "prefixlen", "scope"}], "secondary": [...]}}}, in the shape of Salt's
    C{network.interfaces}.

    CLI Example:

        salttwist '*' network.interfaces
    """
    return _interfaceTable()


def _filter(
    addresses: list[str],
    cidr: str | None,
    type: str | None,  # Salt's name, shadowing the builtin
) -> list[str]:
    if cidr:
        try:
            network = ipaddress.ip_network(str(cidr), strict=False)
        except ValueError as e:
            raise SaltInvocationError(f"invalid cidr {cidr!r}: {e}") from None
        return [a for a in addresses if ipaddress.ip_address(a) in network]
    if type == "public":
        return [a for a in addresses if not ipaddress.ip_address(a).is_private]
    if type == "private":
        return [a for a in addresses if ipaddress.ip_address(a).is_private]
    return addresses


def ip_addrs(
    interface: str | None = None,
    include_loopback: bool = False,
    cidr: str | None = None,
    type: str | None = None,  # Salt's name, shadowing the builtin
) -> list[str]:
    """
    Return the IPv4 addresses of the minion (of one C{interface} if given),
    without loopback unless C{include_loopback=True}; only those in
    C{cidr}, or with C{type=public} or C{type=private} only those.

    CLI Example:

        salttwist '*' network.ip_addrs
        salttwist '*' network.ip_addrs cidr=10.0.0.0/8
        salttwist '*' network.ip_addrs type=private
    """
    addresses = ipAddresses(_interfaceTable(), "inet", interface, include_loopback is True)
    return _filter(addresses, cidr, type)


def ip_addrs6(
    interface: str | None = None, include_loopback: bool = False, cidr: str | None = None
) -> list[str]:
    """
    Return the IPv6 addresses of the minion (of one C{interface} if given),
    without loopback unless C{include_loopback=True}; only those in C{cidr}
    if given.

    CLI Example:

        salttwist '*' network.ip_addrs6
        salttwist '*' network.ip_addrs6 cidr=fd00::/8
    """
    addresses = ipAddresses(_interfaceTable(), "inet6", interface, include_loopback is True)
    return _filter(addresses, cidr, None)


def hwaddr(iface: str) -> str:
    """
    Return the hardware (MAC) address of the interface C{iface}; for an
    unknown interface, Salt's message naming the ones there are.

    CLI Example:

        salttwist '*' network.hwaddr eth0
    """
    table = _interfaceTable()
    if iface not in table:
        return 'Interface "{}" not in available interfaces: "{}"'.format(iface, '", "'.join(table))
    return table[iface].get("hwaddr", "")


def get_fqdn() -> str:
    """
    Return the minion's fully qualified domain name, found as for the
    C{fqdn} grain (the name may need DNS).

    CLI Example:

        salttwist '*' network.get_fqdn
    """
    return getFqdn()


def fqdn() -> str:
    """
    Return the minion's fully qualified domain name (C{network.get_fqdn}).

    CLI Example:

        salttwist '*' network.fqdn
    """
    return getFqdn()


@onReactor
@needsContext
def ping(
    context: LoaderContext,
    host: str,
    timeout: int | None = None,
    return_boolean: bool = False,
    count: int = 4,
) -> Deferred:
    """
    Ping C{host} with the system's C{ping -c COUNT} (4 by default; C{timeout}
    is C{ping -W}, seconds per reply) and return its output, with ping's
    exit code as the job's retcode; with C{return_boolean=True}, return
    whether the host answered instead.

    CLI Example:

        salttwist '*' network.ping archlinux.org
        salttwist '*' network.ping 192.0.2.1 return_boolean=True timeout=1
    """
    host = str(host)
    if not host or host.startswith("-") or any(c.isspace() for c in host):
        raise SaltInvocationError(f"invalid host {host!r}")
    try:
        count = int(count)
        timeout = int(timeout) if timeout else None
    except (TypeError, ValueError):
        raise SaltInvocationError("count and timeout must be numbers") from None
    if shutil.which("ping") is None:
        raise CommandExecutionError("ping is not installed on this minion (no 'ping' on its PATH)")
    argv = ["ping", "-c", str(count)]
    if timeout:
        argv += ["-W", str(timeout)]
    argv.append(host)

    def shape(result: dict[str, Any]) -> Any:
        if return_boolean is True:
            return result["retcode"] == 0
        return Retcode(result["output"], result["retcode"])

    return runCommand(context, argv, python_shell=False).addCallback(shape)
