#!/usr/bin/env python3
"""Opens N keep-alive connections to a server one after another; on each it sends one request,
waits for the answer and then keeps the connection open, idle (as node agents between
heartbeats, or event-stream subscribers, would). Prints how long the N answers took in all and
the slowest one. Usage: idle_clients.py PORT N HOLD_SECONDS"""
import socket, sys, time
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
req = (b"GET /v1/workloads/1 HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n"
       b"Authorization: Bearer tsr_benchmark_token_0123456789abcdef\r\n\r\n")
socks, slowest, t0 = [], 0.0, time.time()
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    start = time.time()
    s.sendall(req)
    s.recv(65536)
    slowest = max(slowest, time.time() - start)
    socks.append(s)
print(f"{n} connections answered in {time.time() - t0:.2f} s, slowest answer {slowest * 1000:.1f} ms", flush=True)
time.sleep(hold)
