"""
The transports salttwist ships, as Twisted plugins providing
L{salttwist.transport.interfaces.ITransport}: C{tcp} (the default) and
C{tls}. Imports nothing heavy: every plugin scan imports this module, and
the transports import pyOpenSSL only when they are used.
"""

from salttwist.transport import tcp, tls

salttwistTCP = tcp.TCP
salttwistTLS = tls.TLS
