"""
The user state module (being written: issue 21).
"""
