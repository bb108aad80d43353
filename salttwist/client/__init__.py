"""
Clients of the master: the local client used by the CLI.
"""
