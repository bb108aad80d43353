"""
Wire transports for the pub and req channels: the framing and the req
client's protocol shared by every transport, and the transports themselves
(L{interfaces.ITransport} plugins: L{tcp}, L{tls}; L{registry} finds them).
"""
