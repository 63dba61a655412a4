import socket

import pytest

from tests.conftest import NetworkAccessError


def test_non_loopback_connect_is_refused():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(NetworkAccessError):
            s.connect(("93.184.216.34", 80))
    finally:
        s.close()


def test_dns_lookup_is_refused():
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("example.org", 443)


def test_loopback_is_allowed():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    cli = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        cli.connect(srv.getsockname())
    finally:
        cli.close()
        srv.close()
