# -*- test-case-name: tests.test_ext_pillar -*-
"""
The pillar's extension point: L{IExtPillar}, Salt's C{ext_pillar} modules.
"""

from __future__ import annotations

from zope.interface import Attribute, Interface


class ExtPillarError(ValueError):
    """
    An external pillar that cannot give its data (a failing command, bad
    output, a bad configuration); the message says which and why. The
    compiler puts it in C{_errors} as Salt's C{"Failed to load ext_pillar
    <name>: <message>"}.
    """


class IExtPillar(Interface):
    """
    A source of pillar data outside C{pillar_roots}, named in the master's
    C{ext_pillar} option (C{- file_tree: {root_dir: /srv/ext}}), run in the
    order configured, after the SLS files (or before them with
    C{ext_pillar_first}); what it returns is merged into the pillar.

    Implementations are made by a factory taking the master's options
    (L{salttwist.pillar.ext.EXT_PILLARS}). C{compile} blocks (disk,
    commands, databases): the compiler runs in a worker process or a
    thread, never on the reactor.
    """

    name = Attribute("The name in C{ext_pillar}: C{'file_tree'}, C{'cmd_json'} ...")

    def compile(
        minionId: str,
        pillar: dict,
        conf: object,
        grains: dict | None = None,
    ) -> dict:
        """
        The data for one minion.

        @param minionId: the minion's authenticated id.
        @param pillar: the pillar compiled so far (read only).
        @param conf: this entry's configuration from C{ext_pillar}, as
            written there (a mapping, a list or a scalar).
        @param grains: the minion's grains.
        @return: a mapping merged into the pillar.
        @raise ExtPillarError: when the data cannot be had; any other
            exception is reported the same way.
        """
