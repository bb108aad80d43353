"""
The twistd plugin for C{twistd salttwist-master}. Imports nothing heavy:
twistd reads the options module only when the plugin is used.
"""

from twisted.application.service import ServiceMaker

salttwistMaster = ServiceMaker(
    "salttwist-master", "salttwist.master.tap", "The salttwist master daemon.", "salttwist-master"
)
