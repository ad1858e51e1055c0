"""``rms serve`` listens on one socket through several descriptors, so that its event loop
accepts several new connections per iteration: every descriptor is the same socket (one port,
one queue), and a connection is accepted through whichever descriptor asks."""

from __future__ import annotations

import socket

import pytest

from message_service.cli import listening_sockets


def test_every_descriptor_is_the_one_bound_socket() -> None:
    listening = listening_sockets("127.0.0.1", 0, 4)
    try:
        assert len(listening) == 4 and len({s.fileno() for s in listening}) == 4
        port = listening[0].getsockname()[1]
        assert {s.getsockname() for s in listening} == {("127.0.0.1", port)}
        assert all(s.get_inheritable() for s in listening)  # for the worker processes
        listening[0].listen(8)
        clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        accepted = [listening[i].accept()[0] for i in (3, 1, 2)]  # one queue, any descriptor
        assert sorted(a.getpeername() for a in accepted) == sorted(
            c.getsockname() for c in clients)
        for each in (*clients, *accepted):
            each.close()
    finally:
        for s in listening:
            s.close()


def test_an_address_in_use_raises_and_leaves_nothing_open() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        with pytest.raises(OSError):
            listening_sockets("127.0.0.1", taken.getsockname()[1], 4)
    finally:
        taken.close()
