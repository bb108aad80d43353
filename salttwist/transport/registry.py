# -*- test-case-name: tests.test_transports -*-
"""
Finding the transport the C{transport} option names, among the installed
plugins.

Transports are found with L{twisted.plugin.getPlugins} in the
C{twisted.plugins} package: every C{twisted/plugins/} directory on
C{sys.path}, so a third party adds one by installing a module there. The
one exception is C{tcp}, the default: that name always means the built-in
transport, returned without a scan. A scan loads every plugin cache, which
imports Twisted's own plugin interfaces (about 40 ms), and every command
would pay that to learn what the default already says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from salttwist.config import ConfigError

if TYPE_CHECKING:
    from salttwist.transport.interfaces import ITransport

__all__ = ["UnknownTransport", "findTransport", "installedTransports"]


class UnknownTransport(ConfigError):
    """
    The C{transport} option names no installed transport, or more than one.
    """


def _byName() -> dict[str, list[ITransport]]:
    """
    Scan the plugins: every transport, by name.
    """
    from twisted.plugin import getPlugins

    import twisted.plugins
    from salttwist.transport.interfaces import ITransport

    found: dict[str, list[ITransport]] = {}
    for transport in getPlugins(ITransport, twisted.plugins):
        same = found.setdefault(str(transport.name), [])
        # One object bound to two names of a plugin module (an import kept
        # beside the declaration, say) is one transport.
        if not any(t is transport for t in same):
            same.append(transport)
    return found


def installedTransports() -> dict[str, ITransport]:
    """
    @return: every installed transport by name (the first one found for a
        name several plugins claim).
    """
    return {name: transports[0] for name, transports in sorted(_byName().items())}


def findTransport(name: str) -> ITransport:
    """
    @param name: the C{transport} option.
    @return: the transport of that name.
    @raise UnknownTransport: no plugin has that name (the message lists the
        installed ones) or several do (it names their types).
    """
    if name == "tcp":
        from salttwist.transport.tcp import TCP

        return TCP
    found = _byName()
    candidates = found.get(name, [])
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        owners = ", ".join(f"{type(t).__module__}.{type(t).__qualname__}" for t in candidates)
        raise UnknownTransport(
            f"transport {name!r} is provided by several plugins ({owners}); uninstall all but one"
        )
    installed = ", ".join(sorted({"tcp", *found})) or "none"
    raise UnknownTransport(f"unknown transport {name!r}; installed: {installed}")
