"""The main thread waits on a socket most of its time, in its own function ``fetch``: a
responder thread answers each request after 20 ms. 60 requests: 1.2 s of waiting, with a
little Python work between them."""

import socket
import threading
import time

DELAY_S = 0.02


def respond(sock: socket.socket) -> None:
    while data := sock.recv(64):
        time.sleep(DELAY_S)
        sock.sendall(data)


def fetch(conn: socket.socket, i: int) -> bytes:
    conn.sendall(i.to_bytes(8, "little"))
    return conn.recv(64)


def work(n: int) -> int:
    return sum(k * k for k in range(n))


conn, peer = socket.socketpair()
threading.Thread(target=respond, args=(peer,), daemon=True).start()
for i in range(60):
    fetch(conn, i)
    work(20_000)
conn.close()
