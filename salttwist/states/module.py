"""
The module state module (being written: issue 21).
"""
