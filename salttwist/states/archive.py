"""
The archive state module (being written: issue 21).
"""
