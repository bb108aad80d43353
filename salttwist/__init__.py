# -*- test-case-name: tests -*-
"""
salttwist: SaltStack-style remote execution and configuration management on Twisted.
"""

__version__ = "0.1.0"
