"""
The file state module (being written: issue 21).
"""
