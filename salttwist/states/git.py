"""
The git state module (being written: issue 21).
"""
