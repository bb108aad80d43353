"""
The cmd state module (being written: issue 21).
"""
