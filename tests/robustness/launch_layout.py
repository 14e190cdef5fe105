#!/usr/bin/env python3
"""A launch's parameter layout against the kernel's own: the backend copies every
parameter at the size the kernel has, so a layout that names fewer bytes (or fewer
parameters) than the kernel takes would have it read past the request, into memory the
server shares among tenants, or dereference a missing pointer. The server must refuse
every such launch with CUDA_ERROR_INVALID_VALUE, and run the exact one. A function whose
module was unloaded must be unknown afterwards.

  launch_layout.py --server BIN --opcodes codegen/opcodes.txt [--driver LIB]

With --driver the server runs its `cuda` backend on that driver library (the emulated
device packaged as one), which takes cuFuncGetParamInfo's word as NVIDIA's driver would.
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'integration'))
import run  # noqa: E402  (the integration harness: Server)

from wire import (INVALID_HANDLE, INVALID_VALUE, SUCCESS, Client, Failure,  # noqa: E402
                  expect, read_opcodes)

BLOB = 32752  # with the 8-byte pointer before it: 32760 bytes, near the 32764 limit
# PTX ISA 8.1 raised the parameter limit from 4 KiB to 32764 bytes: NVIDIA's driver 580
# refuses this module as 8.0 (CUDA_ERROR_INVALID_PTX)
PTX = ('''
.version 8.1
.target sm_90
.address_size 64
.visible .entry leak(.param .u64 out, .param .align 8 .b8 blob[%d])
{
    .reg .b64 %%rd<5>;
    ld.param.u64 %%rd1, [out];
    cvta.to.global.u64 %%rd1, %%rd1;
    ld.param.u64 %%rd2, [blob];
    ld.param.u64 %%rd3, [blob+%d];
    st.global.u64 [%%rd1], %%rd2;
    st.global.u64 [%%rd1+8], %%rd3;
    ret;
}
.visible .entry pair(.param .u64 out, .param .u32 value)
{
    .reg .b64 %%rd<3>;
    .reg .b32 %%r<2>;
    ld.param.u64 %%rd1, [out];
    cvta.to.global.u64 %%rd1, %%rd1;
    ld.param.u32 %%r1, [value];
    st.global.u32 [%%rd1], %%r1;
    ret;
}
''' % (BLOB, BLOB - 8)).encode() + b'\0'
PTX_KIND = 3  # CR_IMAGE_PTX


def launch(c, function, layout, params):
    c.send_async('cuLaunchKernel', [function, [1, 1, 1], [1, 1, 1], 0, 0, layout],
                 bulk=params)
    return c.call('cuStreamSynchronize', [0])[0]


def read(c, dev, size):
    expect('reading the result', c.call('cuMemcpyDtoH_v2', [dev, size, 0])[0], SUCCESS)
    return c.last_bulk


def layouts(server, opcodes):
    c = Client(server.address[len('unix:'):], opcodes)
    loaded = c.call('cuModuleLoadData', [PTX_KIND], bulk=PTX)
    expect('loading the module', loaded[0], SUCCESS)
    module = loaded[1]
    result, leak = c.call('cuModuleGetFunction', [True, module, 'leak'])
    expect('finding leak', result, SUCCESS)
    result, pair = c.call('cuModuleGetFunction', [True, module, 'pair'])
    expect('finding pair', result, SUCCESS)
    result, out = c.call('cuMemAlloc_v2', [True, 64])
    expect('allocating the output', result, SUCCESS)
    c.send_async('cuMemsetD8_v2', [out, 0, 64, 0])
    expect('clearing it', c.call('cuStreamSynchronize', [0])[0], SUCCESS)

    ptr = struct.pack('<Q', out)
    # the attack: an 8-byte buffer, the blob named with size 0
    expect('a layout with a parameter shorter than the kernel\'s is refused',
           launch(c, leak, [[0, 8], [8, 0]], ptr), INVALID_VALUE)
    expect('a layout with fewer parameters than the kernel\'s is refused',
           launch(c, leak, [[0, 8]], ptr), INVALID_VALUE)
    expect('no parameters at all are refused', launch(c, leak, [], b''), INVALID_VALUE)
    expect('a whole buffer shorter than the kernel\'s parameters is refused',
           launch(c, pair, [[0, 8]], ptr), INVALID_VALUE)
    expect('a parameter larger than the kernel\'s is refused',
           launch(c, pair, [[0, 8], [8, 8]], ptr + b'\7' * 8), INVALID_VALUE)
    expect('more parameters than the kernel has are refused',
           launch(c, pair, [[0, 8], [8, 4], [12, 4]], ptr + b'\7' * 8), INVALID_VALUE)
    expect('an entry past the buffer is refused',
           launch(c, pair, [[0, 8], [10, 4]], ptr + b'\7' * 4), INVALID_VALUE)
    expect('nothing reached the device', read(c, out, 16), bytes(16))

    blob = bytes((i * 7 + 3) & 0xff for i in range(BLOB))
    expect('the exact layout runs', launch(c, leak, [[0, 8], [8, BLOB]], ptr + blob), SUCCESS)
    expect('the kernel saw the blob\'s first and last bytes', read(c, out, 16),
           blob[:8] + blob[-8:])
    expect('the exact layout of another kernel runs',
           launch(c, pair, [[0, 8], [8, 4]], ptr + struct.pack('<I', 0x1234567)), SUCCESS)
    expect('it wrote its value', read(c, out, 4), struct.pack('<I', 0x1234567))
    expect('a whole buffer laid out as the kernel\'s runs (cuLaunchKernel\'s extra)',
           launch(c, pair, [[0, 16]], ptr + struct.pack('<II', 0x89abcde, 0)), SUCCESS)
    expect('it wrote its value too', read(c, out, 4), struct.pack('<I', 0x89abcde))

    expect('unloading the module', c.call('cuModuleUnload', [module])[0], SUCCESS)
    expect('its function is unknown afterwards',
           launch(c, pair, [[0, 8], [8, 4]], ptr + bytes(4)), INVALID_HANDLE)
    # a module loaded again (the driver may reuse the freed objects' addresses) gets its
    # functions afresh: their layouts are asked anew
    result, module = c.call('cuModuleLoadData', [PTX_KIND], bulk=PTX)
    expect('loading the module again', result, SUCCESS)
    result, leak2 = c.call('cuModuleGetFunction', [True, module, 'leak'])
    expect('finding leak again', result, SUCCESS)
    expect('its short layout is refused too', launch(c, leak2, [[0, 8], [8, 0]], ptr),
           INVALID_VALUE)
    expect('the connection still serves', c.call('cuStreamSynchronize', [0])[0], SUCCESS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--opcodes', required=True)
    ap.add_argument('--driver')
    args = ap.parse_args()
    opcodes = read_opcodes(args.opcodes)
    extra = ['--backend', 'cuda', '--driver', args.driver] if args.driver else []
    return run.with_server('launch_layout.py', args.server,
                           lambda server: layouts(server, opcodes), extra=extra,
                           errors=(Failure, AssertionError, ConnectionError, OSError))


if __name__ == '__main__':
    sys.exit(main())
