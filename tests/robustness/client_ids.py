#!/usr/bin/env python3
"""Handles created without a round trip: streams and events are created by asynchronous
calls under ids the client chooses. The server must register them under those ids, and
refuse (as a deferred error, reported by the next waiting call) ids below the client
range or already taken, without leaking what it created.

  client_ids.py --server BIN --opcodes codegen/opcodes.txt
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'integration'))
import run  # noqa: E402  (the integration harness: Server)

from wire import (CLIENT_ID_BASE, INVALID_HANDLE, INVALID_VALUE, SUCCESS,  # noqa: E402
                  Client, Failure, expect, read_opcodes)


def client_ids(server, opcodes):
    c = Client(server.address[len('unix:'):], opcodes)
    event, stream = CLIENT_ID_BASE + 0x10, CLIENT_ID_BASE + 0x20
    c.send_async('cuEventCreate', [event, 0])
    expect('an event created under the client\'s id answers', c.call('cuEventQuery', [event]),
           [SUCCESS])
    c.send_async('cuStreamCreate', [stream, 1])
    c.send_async('cuEventRecord', [event, stream])
    expect('a stream created under the client\'s id runs work',
           c.call('cuStreamSynchronize', [stream]), [SUCCESS])

    c.send_async('cuEventCreate', [event, 0])
    expect('an id already taken is refused at the next waiting call',
           c.call('cuStreamSynchronize', [stream]), [INVALID_VALUE])
    expect('and the handle that had it still works', c.call('cuEventQuery', [event]),
           [SUCCESS])
    c.send_async('cuEventCreate', [0x20000, 0])
    expect('an id below the client range is refused', c.call('cuEventQuery', [event]),
           [INVALID_VALUE])
    c.send_async('cuEventCreate', [None, 0])
    expect('a missing id is refused', c.call('cuEventQuery', [event]), [INVALID_VALUE])

    expect('destroying the stream', c.call('cuStreamDestroy_v2', [stream]), [SUCCESS])
    expect('a destroyed stream is unknown', c.call('cuStreamSynchronize', [stream]),
           [INVALID_HANDLE])
    c.send_async('cuStreamCreate', [stream, 1])
    expect('its id may be used again', c.call('cuStreamSynchronize', [stream]), [SUCCESS])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--opcodes', required=True)
    args = ap.parse_args()
    opcodes = read_opcodes(args.opcodes)
    return run.with_server('client_ids.py', args.server, lambda server: client_ids(server, opcodes),
                           errors=(Failure, AssertionError, ConnectionError, OSError))


if __name__ == '__main__':
    sys.exit(main())
