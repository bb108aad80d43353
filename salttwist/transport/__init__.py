"""
Wire transports for the pub and req channels.
"""
