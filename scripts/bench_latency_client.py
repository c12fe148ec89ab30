#!/usr/bin/env python3
"""The client of `make bench-apply`: a fixed rate of PINGs to each master, every request's
latency recorded from the moment it was due (not when it was sent: a client held up behind a
MIGRATE still owes its next requests, as wrk2 counts them), until SECONDS pass or SIGTERM.
A PING, not a GET: it is never redirected while slots move, so its latency is the server's
wait alone (behind a MIGRATE, a CLUSTER SETSLOT's save of nodes.conf, or anything else).
Prints one line: the label, then per port p50/p99/max in ms, requests and errors.
Usage: bench_latency_client.py LABEL RATE_PER_PORT SECONDS PORT|HOST:PORT... (host 127.0.0.1
unless given)."""
import signal
import socket
import sys
import threading
import time

label, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
# (host, port) of each server, in the order given.
servers = [
    (a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) if ":" in a else ("127.0.0.1", int(a))
    for a in sys.argv[4:]
]
ports = [port for _, port in servers]
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
results = {}


def client(host: str, port: int) -> None:
    latencies, errors = [], 0
    try:
        s = socket.create_connection((host, port), timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        results[port] = ([], 1)
        return
    start = time.perf_counter()
    i = 0
    while not stop.is_set() and time.perf_counter() - start < seconds:
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        try:
            s.sendall(b"PING\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    raise OSError("closed")
                reply += chunk
            if not reply.startswith(b"+PONG"):
                errors += 1
        except OSError:
            errors += 1
            break
        latencies.append(time.perf_counter() - due)
        i += 1
    results[port] = (latencies, errors)


threads = [threading.Thread(target=client, args=server) for server in servers]
for t in threads:
    t.start()
while any(t.is_alive() for t in threads):
    for t in threads:
        t.join(timeout=0.1)


def at(v, q):
    return v[min(len(v) - 1, max(0, int(len(v) * q + 0.999999) - 1))] * 1000 if v else 0.0


parts = []
for p in ports:
    v, errors = results.get(p, ([], 1))
    v = sorted(v)
    parts.append(
        f"{p} p50 {at(v, 0.5):.2f} p99 {at(v, 0.99):.2f} max {at(v, 1.0):.2f} ms "
        f"({len(v)} requests, {errors} errors)"
    )
print(f"  client ({rate:.0f} PING/s a master) {label}: " + "; ".join(parts))
