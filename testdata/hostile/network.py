# Connects to a TCP listener and sends a UDP datagram on 127.0.0.1 of the
# host (ports in argv). Expected: strict refuses both (TCP_BLOCKED, and the
# datagram never arrives); workspace allows (TCP_OK).
import socket
import sys

tcp_port, udp_port = int(sys.argv[1]), int(sys.argv[2])
try:
    s = socket.create_connection(("127.0.0.1", tcp_port), timeout=3)
    s.sendall(b"hi")
    print("TCP_OK")
except OSError as e:
    print("TCP_BLOCKED", e.errno)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"hostile-udp", ("127.0.0.1", udp_port))
    print("UDP_SENT")
except OSError as e:
    print("UDP_BLOCKED", e.errno)
