"""A server with nothing to do: its main thread waits in ``wait_for_request`` (a socket that
never answers) and runs no Python code at all, as a hung job or an idle service does."""

import socket
import sys


def wait_for_request(sock: socket.socket) -> bytes:
    return sock.recv(64)


if __name__ == "__main__":
    mine, _theirs = socket.socketpair()
    print("waiting", flush=True)  # the test starts measuring once it is in its wait
    sys.exit(len(wait_for_request(mine)))
