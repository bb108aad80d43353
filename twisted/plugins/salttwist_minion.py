"""
The twistd plugin for C{twistd salttwist-minion}. Imports nothing heavy:
twistd reads the options module only when the plugin is used.
"""

from twisted.application.service import ServiceMaker

salttwistMinion = ServiceMaker(
    "salttwist-minion", "salttwist.minion.tap", "The salttwist minion daemon.", "salttwist-minion"
)
