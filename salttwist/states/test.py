"""
The test state module (being written: issue 21).
"""
