# -*- test-case-name: tests.test_api_options -*-
"""
The API's options: L{salttwist.apiconfig} (shared ground, since the config
table checks them), under the API's own name.
"""

from salttwist.apiconfig import (
    CLIENTS,
    DEFAULT_MAX_BODY,
    DEFAULT_PORT,
    MISSING_CLIENTS,
    ApiOptions,
    checkRestCherrypy,
)

__all__ = [
    "CLIENTS",
    "DEFAULT_MAX_BODY",
    "DEFAULT_PORT",
    "MISSING_CLIENTS",
    "ApiOptions",
    "checkRestCherrypy",
]
