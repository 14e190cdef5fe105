#!/usr/bin/env python3
"""Stream memory operations sent by a hostile client: addresses of another session or of
no allocation, unaligned ones, values past their width, unknown operations and flags,
batches of 0 or 256, waits no value can meet, malformed messages are refused, in a
graph's node of memory operations too; memory a
pending wait reads cannot be freed with cuMemFreeAsync; and a session that leaves with
waits no one will meet (two of them a sequence of values of one address) does not keep the
server: they are met, its resources go, and the next session is served.

  memops_hostile.py --server BIN --opcodes codegen/opcodes.txt
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'integration'))
import run  # noqa: E402  (the integration harness: Server)

from wire import (INVALID_VALUE, SUCCESS, Client, Failure, expect,  # noqa: E402
                  read_opcodes)

WAIT32, WRITE32, FLUSH, WAIT64, WRITE64, BARRIER = 1, 2, 3, 4, 5, 6
GEQ, EQ, AND, NOR = 0, 1, 2, 3


def memops_hostile(server, opcodes):
    path = server.address[len('unix:'):]
    a, b = Client(path, opcodes), Client(path, opcodes)
    mine = a.call('cuMemAlloc_v2', [True, 4096])[1]
    theirs = b.call('cuMemAlloc_v2', [True, 4096])[1]

    def batch(c, ops, stream=0):
        return c.call('cuStreamBatchMemOp_v2', [stream, ops])[0]

    def refused(what, ops, c=a, stream=0):
        expect(what, batch(c, ops, stream), INVALID_VALUE)

    expect('a write and a wait already met', batch(a, [[WRITE32, mine, 5, 0],
                                                       [WAIT32, mine, 5, EQ]]), SUCCESS)
    refused('another session\'s memory', [[WRITE32, theirs, 1, 0]])
    refused('memory of no allocation', [[WRITE64, 0x1000, 1, 0]])
    refused('past the allocation\'s end', [[WRITE64, mine + 4092, 1, 0]])
    refused('an unaligned 32-bit write', [[WRITE32, mine + 2, 1, 0]])
    refused('an unaligned 64-bit wait', [[WAIT64, mine + 4, 1, GEQ]])
    refused('a 32-bit value past 32 bits', [[WRITE32, mine, 1 << 32, 0]])
    refused('a write with a flag', [[WRITE32, mine, 1, 1]])
    refused('an unknown operation', [[9, mine, 1, 0]])
    refused('an unknown condition', [[WAIT32, mine, 1, 4]])
    refused('a barrier of an unknown kind', [[BARRIER, 0, 0, 2]])
    refused('a flush with flags', [[FLUSH, 0, 0, 1]])
    refused('an empty batch', [])
    refused('a batch of 256', [[WRITE32, mine, 1, 0]] * 256)
    refused('an operation of three fields', [[WRITE32, mine, 1]])
    refused('an operation that is no array', [7])
    refused('an unknown stream', [[WRITE32, mine, 1, 0]], stream=0x7777)
    expect('a message of one argument', a.call('cuStreamBatchMemOp_v2', [0])[0], INVALID_VALUE)
    refused('a wait for AND 0 (never met)', [[WAIT32, mine, 0, AND]])
    refused('a wait for NOR with every bit (never met)', [[WAIT64, mine, (1 << 64) - 1, NOR]])
    expect('a barrier and a flush', batch(a, [[BARRIER, 0, 0, 1], [FLUSH, 0, 0, 0]]), SUCCESS)

    # a graph's node of memory operations is checked as the stream's batch is
    g = a.call('cuGraphCreate', [0])[1]
    memop = opcodes['cuStreamBatchMemOp_v2']

    def node(ops):
        return a.call('cuGraphAddNode', [g, [], memop, [0, ops]])[0]

    expect('a node writing another session\'s memory', node([[WRITE32, theirs, 1, 0]]),
           INVALID_VALUE)
    expect('a node of no operations', node([]), INVALID_VALUE)
    expect('a node waiting for AND 0', node([[WAIT32, mine, 0, AND]]), INVALID_VALUE)
    expect('a node of a write and a met wait',
           node([[WRITE32, mine + 8, 4, 0], [WAIT32, mine + 8, 4, EQ]]), SUCCESS)
    exe = a.call('cuGraphInstantiateWithFlags', [g, 0])
    expect('its graph instantiates', exe[0], SUCCESS)
    expect('and launches', a.call('cuGraphLaunch', [exe[1], 0])[0], SUCCESS)
    expect('and finishes', a.call('cuStreamSynchronize', [0])[0], SUCCESS)

    # a wait no one meets: its memory stays, and the session's end meets it
    stream = (1 << 62) + 7
    a.send_async('cuStreamCreate', [stream, 1])
    expect('a wait for a value no one writes',
           batch(a, [[WAIT32, mine + 64, 77, EQ]], stream), SUCCESS)
    expect('its memory is not freed while it waits',
           a.call('cuMemFreeAsync', [mine, 0])[0], INVALID_VALUE)
    expect('a sequence of waits for two values of one address',
           batch(a, [[WAIT32, mine + 128, 5, EQ], [WAIT32, mine + 128, 7, EQ]], stream), SUCCESS)
    a.sock.close()
    server.wait_for('3 stream waits met at its end', 20)
    server.wait_for('session 1: resources of .* released', 20)
    c = Client(path, opcodes)
    dev = c.call('cuMemAlloc_v2', [True, 4096])
    expect('the next session is served', dev[0], SUCCESS)
    expect('and its memory operations run',
           batch(c, [[WRITE32, dev[1], 3, 0], [WAIT32, dev[1], 3, GEQ]]), SUCCESS)
    expect('the other session still runs', c.call('cuCtxSynchronize_v2', [])[0], SUCCESS)
    b.sock.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--opcodes', required=True)
    args = ap.parse_args()
    opcodes = read_opcodes(args.opcodes)
    return run.with_server('memops_hostile.py', args.server,
                           lambda server: memops_hostile(server, opcodes),
                           errors=(Failure, AssertionError, ConnectionError, OSError))


if __name__ == '__main__':
    sys.exit(main())
