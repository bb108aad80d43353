"""
The group state module (being written: issue 21).
"""
