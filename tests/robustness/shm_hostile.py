#!/usr/bin/env python3
"""Shared memory against a hostile client: speaks the protocol by hand over a Unix socket
and offers the server descriptors it must refuse (none, unsealed, not a memfd, smaller
than claimed), then a good region it must use for copies in both directions, with copies
outside it refused. A client that floods the server with descriptors loses its
connection; the server keeps serving the others. Two clients of one tenant together share
no more than --max-shared.

  shm_hostile.py --server BIN --opcodes codegen/opcodes.txt
"""
import argparse
import mmap
import os
import socket
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'integration'))
import run  # noqa: E402  (the integration harness: Server)

from wire import (Client, Failure, INVALID_VALUE, NOT_SUPPORTED, SUCCESS,  # noqa: E402
                  expect, read_opcodes)

OUT_OF_MEMORY = 2


def memfd(size, seal=True):
    fd = os.memfd_create('shm-hostile', os.MFD_ALLOW_SEALING if seal else 0)
    os.ftruncate(fd, size)
    if seal:
        import fcntl
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def hostile(server, opcodes):
    path = server.address[len('unix:'):]
    c = Client(path, opcodes)
    expect('attach without a descriptor', c.call('@shm_attach', [1, 4096])[0], NOT_SUPPORTED)
    fd = memfd(1 << 20, seal=False)
    expect('attach of an unsealed memfd', c.call('@shm_attach', [1, 1 << 20], [fd])[0],
           INVALID_VALUE)
    os.close(fd)
    with tempfile.TemporaryFile() as f:
        f.truncate(1 << 20)
        expect('attach of a plain file', c.call('@shm_attach', [1, 1 << 20], [f.fileno()])[0],
               INVALID_VALUE)
    fd = memfd(1 << 20)
    expect('attach claiming more than the memfd holds',
           c.call('@shm_attach', [1, 2 << 20], [fd])[0], INVALID_VALUE)
    expect('attach of region id 0', c.call('@shm_attach', [0, 1 << 20], [fd])[0],
           INVALID_VALUE)
    expect('attach of a good region', c.call('@shm_attach', [7, 1 << 20], [fd])[0], SUCCESS)
    expect('attach reusing its id', c.call('@shm_attach', [7, 1 << 20], [fd])[0],
           INVALID_VALUE)
    try:
        os.ftruncate(fd, 4096)
        raise Failure('the sealed memfd could be shrunk')
    except PermissionError:
        print('ok: the region cannot shrink under the server')
    region = mmap.mmap(fd, 1 << 20)
    os.close(fd)

    result, dev = c.call('cuMemAlloc_v2', [True, 1 << 16])
    expect('device allocation', result, SUCCESS)
    pattern = bytes((i * 7 + 1) & 0xff for i in range(5000))
    region[100:5100] = pattern
    expect('copy from the region', c.call('cuMemcpyHtoD_v2', [dev + 3, 5000, 0, 7, 100])[0],
           SUCCESS)
    expect('copy into the region', c.call('cuMemcpyDtoH_v2', [dev + 3, 5000, 0, 7, 700000])[0],
           SUCCESS)
    expect('bytes that went around', region[700000:705000] == pattern, True)
    expect('copy reaching past the region',
           c.call('cuMemcpyDtoH_v2', [dev, 4096, 0, 7, (1 << 20) - 4095])[0], INVALID_VALUE)
    expect('copy at an offset past the region',
           c.call('cuMemcpyHtoD_v2', [dev, 1, 0, 7, 1 << 40])[0], INVALID_VALUE)
    expect('copy with a huge length', c.call('cuMemcpyHtoD_v2', [dev, 1 << 63, 0, 7, 0])[0],
           INVALID_VALUE)
    expect('copy through an unknown region', c.call('cuMemcpyHtoD_v2', [dev, 16, 0, 8, 0])[0],
           INVALID_VALUE)
    expect('detach of an unknown region', c.call('@shm_detach', [8])[0], INVALID_VALUE)
    expect('detach', c.call('@shm_detach', [7])[0], SUCCESS)
    expect('copy through a detached region', c.call('cuMemcpyHtoD_v2', [dev, 16, 0, 7, 0])[0],
           INVALID_VALUE)
    region.close()

    # descriptors with no frame to claim them: the connection ends, the server goes on
    flood = Client(path, opcodes)
    fds = [memfd(4096) for _ in range(12)]
    try:
        for fd in fds:
            socket.send_fds(flood.sock, [b'\0'], [fd])
        flood.sock.settimeout(10)
        data = flood.sock.recv(1)
        expect('a flood of descriptors ends the connection', data, b'')
    except (BrokenPipeError, ConnectionResetError):  # ended while we were still sending
        print('ok: a flood of descriptors ends the connection')
    finally:
        for fd in fds:
            os.close(fd)
    again = Client(path, opcodes)
    expect('the server still serves', again.call('cuMemAlloc_v2', [True, 4096])[0], SUCCESS)

    # the server pins what clients share: --max-shared bounds a tenant's sessions together
    first, second = Client(path, opcodes), Client(path, opcodes)
    a, b = memfd(2 << 20), memfd(2 << 20)
    expect('a first client shares 2 MiB', first.call('@shm_attach', [1, 2 << 20], [a])[0],
           SUCCESS)
    expect('a second of the same tenant may not share 2 MiB more (3 MiB in all)',
           second.call('@shm_attach', [1, 2 << 20], [b])[0], OUT_OF_MEMORY)
    expect('the first detaches', first.call('@shm_detach', [1])[0], SUCCESS)
    expect('then the second may', second.call('@shm_attach', [1, 2 << 20], [b])[0], SUCCESS)
    os.close(a)
    os.close(b)
    first.sock.close()
    second.sock.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--opcodes', required=True)
    args = ap.parse_args()
    opcodes = read_opcodes(args.opcodes)
    return run.with_server('shm_hostile.py', args.server, lambda server: hostile(server, opcodes),
                           extra=['--max-shared', '3MiB'],
                           errors=(Failure, AssertionError, ConnectionError, OSError))


if __name__ == '__main__':
    sys.exit(main())
