"""I/O-bound work on threads: each item waits on a socket, as a client waits on a server.

Each item sends a request over a socketpair to a responder thread that answers after a fixed
delay; the worker blocks in ``recv`` with the GIL released. Threads overlap their waits, so
this scales on any interpreter, while the CPU stays mostly idle. The thread count comes from
``PERFSTACK_THREADS``.

    perfstack run --plugins gil workloads/gil_io.py
"""

from __future__ import annotations

import argparse
import socket
import threading
import time

import threaded

DELAY_S = 0.004


def _responder(sock: socket.socket) -> None:
    while True:
        data = sock.recv(64)
        if not data:
            return
        time.sleep(DELAY_S)  # the server's latency
        sock.sendall(data)


_local = threading.local()


def item(i: int) -> bytes:
    """One request: send 8 bytes and wait for the delayed echo."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn, peer = socket.socketpair()
        threading.Thread(target=_responder, args=(peer,), daemon=True, name="server").start()
        _local.conn = conn
    conn.sendall(i.to_bytes(8, "little"))
    return conn.recv(64)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200, help="requests (default 200)")
    args = parser.parse_args()
    threaded.run("gil_io", args.items, item)
