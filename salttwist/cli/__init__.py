# -*- test-case-name: tests -*-
"""Command-line front ends for salttwist."""
