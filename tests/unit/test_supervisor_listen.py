"""The supervisor's listening sockets: one per web worker on one address (``SO_REUSEPORT``), new
connections spread over them by the kernel, and an address in use refused instead of shared."""

from __future__ import annotations

import contextlib
import select
import socket

import pytest

from config.supervisor import listen


def _accept_all(listeners: list[socket.socket], expected: int) -> list[int]:
    """Accept until ``expected`` connections are in; how many each listener accepted."""
    counts = [0] * len(listeners)
    accepted: list[socket.socket] = []
    try:
        while sum(counts) < expected:
            ready, _, _ = select.select(listeners, [], [], 5)
            assert ready, f"only {sum(counts)} of {expected} connections arrived"
            for sock in ready:
                conn, _ = sock.accept()
                accepted.append(conn)
                counts[listeners.index(sock)] += 1
    finally:
        for conn in accepted:
            conn.close()
    return counts


def test_each_worker_gets_its_own_socket_of_one_port_and_a_burst_is_spread_over_them() -> None:
    listeners = listen("127.0.0.1", 0, 2)
    try:
        assert len(set(listeners)) == 2
        (port,) = {sock.getsockname()[1] for sock in listeners}
        assert all(sock.get_inheritable() for sock in listeners)
        with contextlib.ExitStack() as stack:
            for _ in range(64):  # opened at once, before anything accepts
                stack.enter_context(socket.create_connection(("127.0.0.1", port)))
            counts = _accept_all(listeners, 64)
        # The kernel hashes each connection to a socket: all 64 on one has a chance of 2 in 2**64.
        assert all(counts), counts
    finally:
        for sock in listeners:
            sock.close()


def test_an_address_in_use_is_refused_not_shared() -> None:
    listeners = listen("127.0.0.1", 0, 2)
    try:
        port = listeners[0].getsockname()[1]
        with pytest.raises(OSError, match="in use"):
            listen("127.0.0.1", port, 2)
        with pytest.raises(OSError, match="in use"):
            listen("127.0.0.1", port, 1)
    finally:
        for sock in listeners:
            sock.close()


def test_one_worker_gets_one_plain_socket_and_the_port_is_free_again_after_close() -> None:
    (sock,) = listen("127.0.0.1", 0, 1)
    port = sock.getsockname()[1]
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 0
    sock.close()
    (again,) = listen("127.0.0.1", port, 1)
    again.close()
