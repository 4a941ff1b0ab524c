"""Keeps a Python process off the network except for this machine: loaded by
tests/tqsdk_interop.rs and tests/ccxt_interop.rs (this directory on PYTHONPATH) before
their scripts run.

Every name lookup and every connection to a host that is not loopback is refused at
once (OSError) and reported on stderr as `bourse-offline-guard: blocked HOST:PORT`, so
the test sees every place tqsdk would have gone to the internet (its own hosts, when an
endpoint is not given in the environment) whether or not the machine has a network."""

import ipaddress
import socket
import sys

_PREFIX = "bourse-offline-guard"
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _is_local(host):
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]")
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(host, port):
    print(f"{_PREFIX}: blocked {host}:{port}", file=sys.stderr, flush=True)
    raise OSError(101, f"{_PREFIX}: {host}:{port} is not on this machine (the network is closed)")


_getaddrinfo = socket.getaddrinfo


def _guarded_getaddrinfo(host, port, *args, **kwargs):
    if not _is_local(host):
        _refuse(host, port)
    return _getaddrinfo(host, port, *args, **kwargs)


def _checked(address):
    if isinstance(address, tuple) and len(address) >= 2 and not _is_local(address[0]):
        _refuse(address[0], address[1])


_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _guarded_connect(self, address):
    _checked(address)
    return _connect(self, address)


def _guarded_connect_ex(self, address):
    _checked(address)
    return _connect_ex(self, address)


socket.getaddrinfo = _guarded_getaddrinfo
socket.socket.connect = _guarded_connect
socket.socket.connect_ex = _guarded_connect_ex
print(f"{_PREFIX}: active", file=sys.stderr, flush=True)
