"""
The cron state module (being written: issue 21).
"""
