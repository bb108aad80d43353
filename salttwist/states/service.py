"""
The service state module (being written: issue 21).
"""
