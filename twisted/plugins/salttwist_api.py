"""
The twistd plugin for C{twistd salttwist-api}. Imports nothing heavy:
twistd reads the options module only when the plugin is used.
"""

from twisted.application.service import ServiceMaker

salttwistApi = ServiceMaker(
    "salttwist-api",
    "salttwist.api.tap",
    "Salt's REST API for the salttwist master.",
    "salttwist-api",
)
