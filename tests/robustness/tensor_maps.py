#!/usr/bin/env python3
"""Tensor maps name device memory: a descriptor holds the tensor's address, and a kernel's
TMA unit reads and writes anywhere within its dims and strides without another check. So
the server encodes one only over the caller's own memory: a session that names another
session's allocation (or reaches into it from its own) is refused with
CUDA_ERROR_INVALID_VALUE, and so is every malformed or hostile body (arrays of the wrong
length, huge ranks, sizes whose extent overflows), without harm to the server.

  tensor_maps.py --server BIN --opcodes codegen/opcodes.txt [--driver LIB]

With --driver the server runs its `cuda` backend on that driver library (the emulated
device packaged as one).
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'integration'))
import run  # noqa: E402  (the integration harness: Server)

from wire import INVALID_VALUE, SUCCESS, Client, Failure, expect, read_opcodes  # noqa: E402

FLOAT32, FLOAT16 = 7, 6
SWIZZLE_128B, L2_128B = 3, 2
ROW, ROWS = 256, 64  # 64 x 64 floats, no padding: 16 KiB
BYTES = ROW * ROWS


def u64s(*v):
    return struct.pack('<%dQ' % len(v), *v)


def u32s(*v):
    return struct.pack('<%dI' % len(v), *v)


def i32s(*v):
    return struct.pack('<%di' % len(v), *v)


def tiled(address, dims=(ROW // 4, ROWS), strides=(ROW,), rank=None, dtype=FLOAT32,
          box=None, elems=None):
    """A cuTensorMapEncodeTiled body (common/protocol.h); arrays may be given as raw bytes."""
    rank = len(dims) if rank is None else rank
    pack = lambda v, f: v if isinstance(v, bytes) else f(*v)  # noqa: E731
    return [dtype, rank, address, pack(dims, u64s), pack(strides, u64s),
            pack(box if box is not None else (32,) * len(dims), u32s),
            pack(elems if elems is not None else (1,) * len(dims), u32s),
            0, SWIZZLE_128B, L2_128B, 0]


def im2col(address, lower=(0, 0), upper=(0, 0)):
    """A cuTensorMapEncodeIm2col body over an NHWC half tensor of 2 x 8 x 8 x 64: 16 KiB."""
    pack = lambda v: v if isinstance(v, bytes) else i32s(*v)  # noqa: E731
    return [FLOAT16, 4, address, u64s(64, 8, 8, 2), u64s(128, 1024, 8192), pack(lower),
            pack(upper), 64, 64, u32s(1, 1, 1, 1), 0, SWIZZLE_128B, L2_128B, 0]


def encode(c, op, body):
    """The CUresult, and the descriptor's 128 bytes on success."""
    result = c.call(op, body)[0]
    if result != SUCCESS:
        return result, None
    b = c.last_body
    # [result, bin 8 of 128 bytes]
    if b[:4] != b'\x92\x00\xc4\x80' or len(b) != 4 + 128:
        raise Failure('malformed reply %r' % b[:8])
    return result, b[4:]


def alloc(c, size):
    result, ptr = c.call('cuMemAlloc_v2', [True, size])
    expect('allocating %d bytes' % size, result, SUCCESS)
    return ptr


def tensor_maps(server, opcodes):
    path = server.address[len('unix:'):]
    victim, attacker = Client(path, opcodes), Client(path, opcodes)
    theirs = alloc(victim, BYTES)
    mine = alloc(attacker, BYTES)

    result, desc = encode(attacker, 'cuTensorMapEncodeTiled', tiled(mine))
    expect('a tiled map over the session\'s own allocation is encoded', result, SUCCESS)
    expect('its descriptor is not all zero', desc != bytes(128), True)
    result, desc = encode(attacker, 'cuTensorMapEncodeIm2col', im2col(mine))
    expect('an im2col map over it too', result, SUCCESS)

    # the isolation point
    expect('a tiled map over another session\'s allocation is refused',
           encode(attacker, 'cuTensorMapEncodeTiled', tiled(theirs))[0], INVALID_VALUE)
    expect('so is one inside it',
           encode(attacker, 'cuTensorMapEncodeTiled',
                  tiled(theirs + ROW, dims=(ROW // 4, 2)))[0], INVALID_VALUE)
    expect('and an im2col map over it',
           encode(attacker, 'cuTensorMapEncodeIm2col', im2col(theirs))[0], INVALID_VALUE)
    expect('a map that starts in its own allocation and reaches past its end is refused',
           encode(attacker, 'cuTensorMapEncodeTiled', tiled(mine, dims=(ROW // 4, ROWS + 1)))[0],
           INVALID_VALUE)
    expect('so is one whose stride carries the last row past it',
           encode(attacker, 'cuTensorMapEncodeTiled', tiled(mine, strides=(ROW * 2,)))[0],
           INVALID_VALUE)
    expect('a made-up address is refused',
           encode(attacker, 'cuTensorMapEncodeTiled', tiled(0x7f0000000000))[0], INVALID_VALUE)

    # hostile sizes
    tiled_cases = [
        ('a dims array one element short', tiled(mine, dims=u64s(ROW // 4), rank=2)),
        ('a dims array one element long', tiled(mine, dims=u64s(64, 64, 1), rank=2)),
        ('a strides array of the wrong length', tiled(mine, strides=u64s(ROW, ROW))),
        ('a box array of the wrong length', tiled(mine, box=u32s(32))),
        ('an element-strides array of the wrong length', tiled(mine, elems=u32s(1, 1, 1))),
        ('rank 0', tiled(mine, dims=b'', strides=b'', box=b'', elems=b'', rank=0)),
        ('rank 6', tiled(mine, dims=(1,) * 6, strides=(16,) * 5)),
        ('rank 1000 with arrays of that length',
         tiled(mine, dims=(1,) * 1000, strides=(16,) * 999)),
        ('rank 2^32 + 2', tiled(mine, rank=(1 << 32) + 2)),
        ('strides whose extent overflows',
         tiled(mine, dims=(64, 1 << 32), strides=((1 << 63) + 256,))),
        ('a row whose bytes overflow', tiled(mine, dims=((1 << 64) - 1, 1))),
        ('a zero dim', tiled(mine, dims=(0, ROWS))),
        ('an unknown data type', tiled(mine, dtype=1000)),
        ('a data type past 32 bits', tiled(mine, dtype=(1 << 40) + FLOAT32)),
        ('a negative address', tiled(-16)),
    ]
    for what, body in tiled_cases:
        expect(what + ' is refused',
               encode(attacker, 'cuTensorMapEncodeTiled', body)[0], INVALID_VALUE)
    bad = tiled(mine)
    expect('a body one element short is refused',
           encode(attacker, 'cuTensorMapEncodeTiled', bad[:-1])[0], INVALID_VALUE)
    bad = tiled(mine)
    bad[3] = [ROW // 4, ROWS]
    expect('dims as an array instead of a bin are refused',
           encode(attacker, 'cuTensorMapEncodeTiled', bad)[0], INVALID_VALUE)
    expect('im2col corners of the wrong length are refused',
           encode(attacker, 'cuTensorMapEncodeIm2col', im2col(mine, lower=(0, 0, 0)))[0],
           INVALID_VALUE)
    body = im2col(mine)
    body[1] = 2
    expect('im2col of rank 2 is refused',
           encode(attacker, 'cuTensorMapEncodeIm2col', body)[0], INVALID_VALUE)
    expect('a tiled body sent as im2col is refused',
           encode(attacker, 'cuTensorMapEncodeIm2col', tiled(mine))[0], INVALID_VALUE)

    # neither session was harmed
    expect('the attacker still encodes its own maps',
           encode(attacker, 'cuTensorMapEncodeTiled', tiled(mine))[0], SUCCESS)
    expect('the victim still serves', victim.call('cuStreamSynchronize', [0])[0], SUCCESS)
    expect('and encodes over its own allocation',
           encode(victim, 'cuTensorMapEncodeTiled', tiled(theirs))[0], SUCCESS)
    expect('but not over the attacker\'s',
           encode(victim, 'cuTensorMapEncodeTiled', tiled(mine))[0], INVALID_VALUE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--opcodes', required=True)
    ap.add_argument('--driver')
    args = ap.parse_args()
    opcodes = read_opcodes(args.opcodes)
    extra = ['--backend', 'cuda', '--driver', args.driver] if args.driver else []
    return run.with_server('tensor_maps.py', args.server,
                           lambda server: tensor_maps(server, opcodes), extra=extra,
                           errors=(Failure, AssertionError, ConnectionError, OSError))


if __name__ == '__main__':
    sys.exit(main())
