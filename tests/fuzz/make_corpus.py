#!/usr/bin/env python3
"""Writes the committed seed corpus of the fuzz targets: tests/fuzz/corpus/<target>/.

    tests/fuzz/make_corpus.py [OUTPUT_DIR (default tests/fuzz/corpus)]
    tests/fuzz/make_corpus.py --load-images OUTPUT_DIR IMAGE...   (scripts/fuzz.sh)
    tests/fuzz/make_corpus.py --tls-hello FUZZ_TLS OUTPUT_DIR

Seeds are small, well-formed examples of what each target parses, so that the fuzzer starts
from inputs that get past the first checks: frame headers, msgpack bodies, code images
(PTX, and fatbin containers with stored, LZ4 and zstd entries built here byte by byte),
whole client conversations for fuzz_request (its input format is described at the top of
fuzz_request.c), what a client sends a TLS listener for fuzz_tls (described at the top of
fuzz_tls.c) and a PTX module for the interpreter's targets. Opcodes come from
codegen/opcodes.txt, so the seeds follow it. Larger seeds come from the build at run time:
scripts/fuzz.sh copies nvcc's fatbins and cubins, and with --load-images wraps them in
conversations that load them. fuzz_tls's ClientHello seeds need a client's real first
flight: --tls-hello has the built fuzz_tls make one (with a client cr_tls_t, and so with
fresh random bytes each time) and writes the seeds made of it into OUTPUT_DIR
(tests/fuzz/corpus/fuzz_tls for the committed ones).
Standard library only; rerunning it rewrites the same files (but for --tls-hello's)."""
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# --- msgpack, the few forms the protocol uses --------------------------------------------


class Ext:
    def __init__(self, kind, data):
        self.kind, self.data = kind, data


def mp(v):
    if v is None:
        return b'\xc0'
    if v is True:
        return b'\xc3'
    if v is False:
        return b'\xc2'
    if isinstance(v, int):
        if 0 <= v < 0x80:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack('b', v)
        if v >= 0:
            for fmt, tag in (('>B', 0xcc), ('>H', 0xcd), ('>I', 0xce), ('>Q', 0xcf)):
                if v < 1 << (8 * struct.calcsize(fmt)):
                    return bytes([tag]) + struct.pack(fmt, v)
        for fmt, tag in (('>b', 0xd0), ('>h', 0xd1), ('>i', 0xd2), ('>q', 0xd3)):
            if v >= -(1 << (8 * struct.calcsize(fmt) - 1)):
                return bytes([tag]) + struct.pack(fmt, v)
    if isinstance(v, float):
        return b'\xcb' + struct.pack('>d', v)
    if isinstance(v, str):
        b = v.encode()
        if len(b) < 32:
            return bytes([0xa0 | len(b)]) + b
        return (b'\xd9' + bytes([len(b)]) if len(b) < 256 else b'\xda' + struct.pack('>H', len(b))) + b
    if isinstance(v, (bytes, bytearray)):
        n = len(v)
        return (b'\xc4' + bytes([n]) if n < 256 else b'\xc5' + struct.pack('>H', n)) + bytes(v)
    if isinstance(v, Ext):
        return b'\xc7' + bytes([len(v.data)]) + struct.pack('b', v.kind) + v.data
    if isinstance(v, (list, tuple)):
        head = bytes([0x90 | len(v)]) if len(v) < 16 else b'\xdc' + struct.pack('>H', len(v))
        return head + b''.join(mp(x) for x in v)
    if isinstance(v, dict):
        head = bytes([0x80 | len(v)]) if len(v) < 16 else b'\xde' + struct.pack('>H', len(v))
        return head + b''.join(mp(k) + mp(x) for k, x in v.items())
    raise TypeError(v)


# --- opcodes -----------------------------------------------------------------------------


def load_opcodes():
    ops, n = {}, 0
    with open(os.path.join(ROOT, 'codegen', 'opcodes.txt')) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            n += 1
            ops[line] = n
    return ops


OP = load_opcodes()

# --- code images ------------------------------------------------------------------------

PTX = b"""//
// a kernel with parameters, a global with initial contents and a constant bank
.version 8.0
.target sm_75
.address_size 64

.global .align 4 .u32 counter = 7;
.const .align 4 .b8 table[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};

.visible .entry fill(
    .param .u64 fill_param_0,
    .param .u32 fill_param_1
)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [fill_param_0];
    ld.param.u32 %r1, [fill_param_1];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r3, [counter];
    add.s32 %r4, %r1, %r2;
    add.s32 %r4, %r4, %r3;
    st.global.u32 [%rd4], %r4;
    ret;
}

.visible .entry empty()
{
    ret;
}
"""


def fatbin_entry(kind, payload, flags=0x11, compressed=None, usize=0, arch=75):
    """One entry: header (0x40 bytes) and its payload padded to 8 bytes."""
    data = compressed if compressed is not None else payload
    padded = data + b'\0' * (-len(data) % 8)
    h = bytearray(0x40)
    struct.pack_into('<HHIQ', h, 0, kind, 0x0101, 0x40, len(padded))
    struct.pack_into('<II', h, 0x10, len(data) if compressed is not None else 0, 0)
    struct.pack_into('<HHI', h, 0x18, 0, 8, arch)
    struct.pack_into('<Q', h, 0x28, flags)
    struct.pack_into('<Q', h, 0x38, usize)
    return bytes(h) + padded


def fatbin(*entries):
    body = b''.join(entries)
    return struct.pack('<IHHQ', 0xBA55ED50, 1, 16, len(body)) + body


def lz4_literals(data):
    """An LZ4 raw block of literals only: valid, and all nvcc's reader needs to see."""
    n = len(data)
    if n < 15:
        return bytes([n << 4]) + data
    out = bytearray([0xf0])
    n -= 15
    while n >= 255:
        out.append(255)
        n -= 255
    out.append(n)
    return bytes(out) + data


def zstd_raw(data):
    """A zstd frame of one raw block, with its content size stated (as nvcc writes it)."""
    assert len(data) < 1 << 16
    frame = struct.pack('<I', 0xFD2FB528)
    frame += bytes([0x60]) + struct.pack('<H', len(data) - 256)  # single segment, 2-byte FCS
    block = (len(data) << 3) | 1  # last block, raw
    return frame + struct.pack('<I', block)[:3] + data


def tiny_elf():
    """An ELF header, a null section and a section-name table: an empty cubin for sm_75."""
    names = b'\0.shstrtab\0'
    shoff = 64 + len(names) + (-(64 + len(names)) % 8)
    eh = bytearray(64)
    eh[0:16] = b'\x7fELF\x02\x01\x01\x33\x07' + b'\0' * 7
    struct.pack_into('<HHIQQQIHHHHHH', eh, 16, 2, 190, 1, 0, 0, shoff, 0x4b054b, 64, 56, 0,
                     64, 2, 1)
    sh = bytearray(128)
    struct.pack_into('<IIQQQQIIQQ', sh, 64, 1, 3, 0, 0, 64, len(names), 0, 0, 1, 0)
    return bytes(eh) + names + b'\0' * (shoff - 64 - len(names)) + bytes(sh)


# --- fuzz_request conversations ---------------------------------------------------------

REPLY, ASYNC, PARTIAL, UNSEALED, NO_FD = 1, 2, 4, 8, 16  # bits 0-2: the frame's flags
DEV = 0x700000000000          # the emulated device's memory under ASan (first allocation)
AFTER_CODE = DEV + 0x400      # the first allocation once the seed's code put its globals at DEV
FIRST_ID = 0x10000            # the server's first handle id, then every 0x10
CLIENT_ID = 1 << 62           # ids the client picks for handles made asynchronously
HTOD, DTOH, DTOD = 1, 2, 3


def frame(op, body, bulk=b'', flags=0):
    op = OP[op] if isinstance(op, str) else op
    raw = mp(body) if not isinstance(body, bytes) else body
    return struct.pack('<BHHI', flags, op, len(raw), len(bulk)) + raw + bulk


def host_func_done(call_id):
    return struct.pack('<BHHI', 0, OP['@host_func_done'], call_id, 0)


def conversation(*frames, small=False):
    return bytes([1 if small else 0]) + b''.join(frames)


def hello(token='fuzz-token-big-tenant', protocol=1):
    return frame('@hello', {'protocol': protocol, 'cuda_version': 13000, 'client': 'seed',
                            'pid': 42, 'host': 'corpus', 'program': '/seed/prog',
                            'token': token})


def request_seeds():
    ptx = PTX + b'\0'
    lib = fatbin(fatbin_entry(1, PTX + b'\0'))
    launch_params = struct.pack('<QI', AFTER_CODE, 5) + b'\0' * 4
    faulting_params = struct.pack('<QI', DEV + 4, 5) + b'\0' * 4  # past the 4-byte global
    s = {}
    s['memory'] = conversation(
        frame('cuMemAlloc_v2', [True, 4096]),
        frame('cuMemsetD8_v2', [DEV, 0x5a, 4096, 0], flags=ASYNC),
        frame('cuMemsetD32Async', [DEV + 64, 0xdeadbeef, 16, 0], flags=ASYNC),
        frame('cuMemcpyHtoD_v2', [DEV, 16, 0], bytes(range(16))),
        frame('cuMemcpyHtoDAsync_v2', [DEV + 16, 8, 0], b'ABCDEFGH', flags=ASYNC),
        frame('cuMemcpyDtoD_v2', [DEV + 1024, DEV, 32, 0], flags=ASYNC),
        frame('cuMemsetD2D8_v2', [DEV + 2048, 64, 1, 16, 4, 0], flags=ASYNC),
        frame('cuMemcpyDtoH_v2', [DEV, 64, 0]),
        frame('cuMemcpyDtoHAsync_v2', [DEV + 1024, 32, 0], flags=ASYNC),
        frame('cuMemGetInfo_v2', [True, True]),
        frame('cuMemFree_v2', [DEV]))
    # the virtual-memory API: the first reservation lies where the emulated device's
    # reservable region starts (after its 64 MiB), physical memory is the session's id 0x20000
    vmm, phys, piece = DEV + (64 << 20), 0x20000, 2 << 20
    prop = struct.pack('<iiiiQQ', 1, 0, 1, 0, 0, 0)  # pinned, on device 0
    access = struct.pack('<iii', 1, 0, 3)              # device 0, read-write
    location = struct.pack('<ii', 1, 0)
    s['virtual_memory'] = conversation(
        frame('cuMemGetAllocationGranularity', [True, prop, 1]),
        frame('cuMemAddressReserve', [True, 2 * piece, 0, 0, 0]),
        frame('cuMemCreate', [True, piece, prop, 0]),
        frame('cuMemCreate', [True, piece, prop, 0]),
        frame('cuMemMap', [vmm, piece, 0, phys, 0]),
        frame('cuMemMap', [vmm + piece, piece, 0, phys + 1, 0]),
        frame('cuMemSetAccess', [vmm, 2 * piece, access, 1]),
        frame('cuMemGetAccess', [True, location, vmm + 8]),
        frame('cuMemcpyHtoD_v2', [vmm + piece - 8, 16, 0], bytes(range(16))),
        frame('cuMemsetD8_v2', [vmm + piece - 32, 7, 64, 0], flags=ASYNC),
        frame('cuMemcpyDtoH_v2', [vmm + piece - 32, 64, 0]),
        frame('cuMemGetAllocationPropertiesFromHandle', [True, phys]),
        frame('cuMemRetainAllocationHandle', [vmm + piece + 8]),
        frame('cuMemRelease', [phys + 1]),
        frame('cuMemRetainAllocationHandle', [vmm + 4 * piece]),
        frame('cuMemUnmap', [vmm, 2 * piece]),
        frame('cuMemRelease', [phys]),
        frame('cuMemRelease', [phys + 1]),
        frame('cuMemAddressFree', [vmm, 2 * piece]))
    # left mapped and unreleased: the session's end gives it all back
    s['virtual_memory_left'] = conversation(
        frame('cuMemAddressReserve', [True, piece, 0, 0, 0]),
        frame('cuMemCreate', [True, piece, prop, 0]),
        frame('cuMemMap', [vmm, piece, 0, phys, 0]),
        frame('cuMemRelease', [phys]),
        frame('cuMemcpyHtoD_v2', [vmm, 4, 0], b'abcd'))
    s['module_launch'] = conversation(
        frame('cuModuleLoadData', [0], ptx),
        frame('cuModuleGetFunction', [True, FIRST_ID, 'fill']),
        frame('cuModuleGetGlobal_v2', [True, True, FIRST_ID, 'counter']),
        frame('cuMemAlloc_v2', [True, 4096]),
        frame('cuFuncGetAttribute', [True, 0, FIRST_ID + 0x10]),
        frame('cuFuncGetParamInfo', [FIRST_ID + 0x10, 1, True, True]),
        frame('cuLaunchKernel', [FIRST_ID + 0x10, [1, 1, 1], [32, 1, 1], 0, 0, [[0, 8], [8, 4]]],
              launch_params, flags=ASYNC),
        frame('cuCtxSynchronize_v2', []),
        frame('cuMemcpyDtoH_v2', [AFTER_CODE, 128, 0]),
        frame('cuOccupancyMaxActiveBlocksPerMultiprocessor', [True, FIRST_ID + 0x10, 128, 0]),
        frame('cuOccupancyMaxPotentialBlockSizeWithFlags', [FIRST_ID + 0x10, [0] * 32, 0, 0]),
        frame('cuModuleUnload', [FIRST_ID]))
    s['library_launch_ex'] = conversation(
        frame('cuLibraryLoadData', [0], lib),
        frame('cuLibraryGetKernel', [True, FIRST_ID, 'fill']),
        frame('cuLibraryGetGlobal', [True, True, FIRST_ID, 'counter']),
        frame('cuLibraryGetModule', [True, FIRST_ID]),
        frame('cuKernelGetFunction', [True, FIRST_ID + 0x10]),
        frame('cuMemAlloc_v2', [True, 4096]),
        frame('cuEventCreate', [CLIENT_ID + 1, 0], flags=ASYNC),
        frame('cuLaunchKernelEx', [FIRST_ID + 0x10, [2, 1, 1], [32, 1, 1], 0, 0,
                                   [[0, 8], [8, 4]], [[7, b'\x01' + b'\0' * 63]]],
              launch_params, flags=ASYNC),
        frame('cuOccupancyMaxActiveClusters', [FIRST_ID + 0x10, [1, 1, 1], [32, 1, 1], 0, []]),
        frame('cuStreamSynchronize', [0]),
        frame('cuMemcpyDtoH_v2', [AFTER_CODE, 256, 0]),
        frame('cuLibraryUnload', [FIRST_ID]))
    s['kernel_fault'] = conversation(
        frame('cuStreamCreate', [CLIENT_ID + 2, 1], flags=ASYNC),
        frame('cuModuleLoadData', [0], ptx),
        frame('cuModuleGetFunction', [True, FIRST_ID, 'fill']),
        frame('cuLaunchKernel', [FIRST_ID + 0x10, [1, 1, 1], [32, 1, 1], 0, CLIENT_ID + 2,
                                 [[0, 8], [8, 4]]], faulting_params, flags=ASYNC),
        frame('cuStreamSynchronize', [CLIENT_ID + 2]),
        frame('cuMemGetInfo_v2', [True, True]))
    s['streams_events'] = conversation(
        frame('cuStreamCreate', [CLIENT_ID + 2, 1], flags=ASYNC),
        frame('cuStreamCreateWithPriority', [CLIENT_ID + 3, 0, -1], flags=ASYNC),
        frame('cuEventCreate', [CLIENT_ID + 4, 0], flags=ASYNC),
        frame('cuMemAlloc_v2', [True, 256]),
        frame('cuMemsetD8Async', [DEV, 1, 256, CLIENT_ID + 2], flags=ASYNC),
        frame('cuEventRecord', [CLIENT_ID + 4, CLIENT_ID + 2], flags=ASYNC),
        frame('cuStreamWaitEvent', [CLIENT_ID + 3, CLIENT_ID + 4, 0], flags=ASYNC),
        frame('cuLaunchHostFunc', [CLIENT_ID + 3], flags=ASYNC),
        frame('cuEventQuery', [CLIENT_ID + 4]),
        frame('cuStreamQuery', [CLIENT_ID + 3]),
        frame('cuEventSynchronize', [CLIENT_ID + 4]),
        frame('cuStreamSynchronize', [CLIENT_ID + 3]),
        frame('cuStreamDestroy_v2', [CLIENT_ID + 2]),
        frame('cuEventDestroy_v2', [CLIENT_ID + 4]))
    # stream capture: two streams forked and joined by events, a graph instantiated and
    # launched on another stream, launched into a second capture, and one left capturing
    s['graphs'] = conversation(
        frame('cuStreamCreate', [CLIENT_ID + 2, 1], flags=ASYNC),
        frame('cuStreamCreate', [CLIENT_ID + 3, 1], flags=ASYNC),
        frame('cuEventCreate', [CLIENT_ID + 4, 0], flags=ASYNC),
        frame('cuMemAlloc_v2', [True, 4096]),
        frame('cuStreamBeginCapture_v2', [CLIENT_ID + 2, 0]),
        frame('cuMemsetD32Async', [DEV, 7, 1024, CLIENT_ID + 2], flags=ASYNC),
        frame('cuEventRecord', [CLIENT_ID + 4, CLIENT_ID + 2], flags=ASYNC),
        frame('cuStreamWaitEvent', [CLIENT_ID + 3, CLIENT_ID + 4, 0], flags=ASYNC),
        frame('cuMemcpyDtoDAsync_v2', [DEV + 2048, DEV, 1024, CLIENT_ID + 3], flags=ASYNC),
        frame('cuStreamEndCapture', [CLIENT_ID + 2]),
        frame('cuGraphInstantiateWithFlags', [FIRST_ID, 0]),
        frame('cuGraphLaunch', [FIRST_ID + 0x10, 0], flags=ASYNC),
        frame('cuGraphUpload', [FIRST_ID + 0x10, CLIENT_ID + 3], flags=ASYNC),
        frame('cuStreamBeginCapture_v2', [CLIENT_ID + 3, 2]),
        frame('cuGraphLaunch', [FIRST_ID + 0x10, CLIENT_ID + 3], flags=ASYNC),
        frame('cuStreamEndCapture', [CLIENT_ID + 3]),
        frame('cuGraphDestroy', [FIRST_ID]),
        frame('cuGraphLaunch', [FIRST_ID + 0x10, CLIENT_ID + 2], flags=ASYNC),
        frame('cuStreamSynchronize', [CLIENT_ID + 2]),
        frame('cuMemcpyDtoH_v2', [DEV + 2048, 64, 0]),
        frame('cuGraphExecDestroy', [FIRST_ID + 0x10]),
        frame('cuStreamBeginCapture_v2', [CLIENT_ID + 2, 1]),
        frame('cuMemAllocAsync', [True, 4096, CLIENT_ID + 2]),
        frame('cuMemFreeAsync', [DEV + 8192, CLIENT_ID + 2], flags=ASYNC),
        frame('cuMemFreeAsync', [DEV, CLIENT_ID + 2], flags=ASYNC),
        frame('cuMemsetD8Async', [DEV, 1, 16, CLIENT_ID + 2], flags=ASYNC),
        # work a capture keeps, and a graph launch, sent as if the client waited: answered
        frame('cuMemsetD8Async', [DEV, 2, 16, CLIENT_ID + 2]),
        frame('cuEventRecord', [CLIENT_ID + 4, CLIENT_ID + 2]),
        frame('cuStreamWaitEvent', [CLIENT_ID + 3, CLIENT_ID + 4, 0]),
        frame('cuGraphLaunch', [FIRST_ID + 0x10, CLIENT_ID + 3]))
    # a graph built node by node: memset, copy, empty and event nodes, a child graph, an edge
    # forward and one backward, a clone, a node's arguments changed in the executable graph
    # and in the graph, its DOT picture, memory and host nodes, updates from the clone and from the
    # graph
    s['graph_nodes'] = conversation(
        frame('cuStreamCreate', [CLIENT_ID + 2, 1], flags=ASYNC),
        frame('cuEventCreate', [CLIENT_ID + 4, 0], flags=ASYNC),
        frame('cuMemAlloc_v2', [True, 4096]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphAddNode', [FIRST_ID, [], OP['cuMemsetD32Async'], [DEV, 9, 1024, 0]]),
        frame('cuGraphAddNode', [FIRST_ID, [FIRST_ID + 0x10], OP['cuMemcpyDtoDAsync_v2'],
                                 [DEV + 2048, DEV, 1024, 0]]),
        frame('cuGraphAddNode', [FIRST_ID, [FIRST_ID + 0x20], 0, []]),
        frame('cuGraphAddNode', [FIRST_ID, [], OP['cuEventRecord'], [CLIENT_ID + 4, 0]]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphAddChildGraphNode', [FIRST_ID, [FIRST_ID + 0x30], FIRST_ID]),
        frame('cuGraphAddChildGraphNode', [FIRST_ID, [], FIRST_ID + 0x50]),
        frame('cuGraphAddDependencies', [FIRST_ID, [FIRST_ID + 0x10], [FIRST_ID + 0x20]]),
        frame('cuGraphAddDependencies', [FIRST_ID, [FIRST_ID + 0x20], [FIRST_ID + 0x10]]),
        frame('cuGraphClone', [FIRST_ID]),
        frame('cuGraphInstantiateWithFlags', [FIRST_ID, 0]),
        frame('cuGraphNodeSetParams', [FIRST_ID + 0x80, FIRST_ID + 0x10, OP['cuLaunchKernel'],
                                       [1, [1, 1, 1], [1, 1, 1], 0, 0, []]]),
        frame('cuGraphNodeSetParams', [FIRST_ID + 0x80, FIRST_ID + 0x10,
                                       OP['cuMemsetD32Async'], [DEV, 3, 1024, 0]]),
        frame('cuGraphNodeSetParams', [0, FIRST_ID + 0x10, OP['cuMemsetD8Async'],
                                       [DEV, 3, 4096, 0]]),
        frame('cuGraphLaunch', [FIRST_ID + 0x80, CLIENT_ID + 2], flags=ASYNC),
        frame('cuStreamSynchronize', [CLIENT_ID + 2]),
        frame('cuGraphGetNodes', [FIRST_ID]),
        frame('cuGraphDebugDotPrint', [FIRST_ID]),
        frame('cuGraphGetNodes', [FIRST_ID, True]),
        frame('cuGraphNodeGetType', [FIRST_ID + 0x10]),
        frame('cuGraphNodeSetEnabled', [FIRST_ID + 0x80, FIRST_ID + 0x10, 0]),
        frame('cuGraphNodeGetEnabled', [FIRST_ID + 0x80, FIRST_ID + 0x10]),
        frame('cuGraphExecGetFlags', [FIRST_ID + 0x80]),
        frame('cuGraphAddMemAllocNode', [FIRST_ID, [FIRST_ID + 0x10], 1 << 20]),
        frame('cuGraphAddMemFreeNode', [FIRST_ID, [], DEV]),
        frame('cuGraphAddMemAllocNode', [FIRST_ID, [], 1 << 40]),
        frame('cuGraphAddNode', [FIRST_ID, [], OP['cuLaunchHostFunc'], [0, 7]]),
        frame('cuLaunchHostFunc', [0, 9], flags=ASYNC),
        frame('cuGraphExecUpdate_v2', [FIRST_ID + 0x80, FIRST_ID + 0x70]),
        frame('cuGraphExecUpdate_v2', [FIRST_ID + 0x80, FIRST_ID]),
        frame('cuGraphGetEdges', [FIRST_ID]),
        frame('cuGraphGetRootNodes', [FIRST_ID]),
        frame('cuGraphNodeGetDependencies', [FIRST_ID + 0x20]),
        frame('cuGraphNodeGetDependentNodes', [FIRST_ID + 0x10]),
        frame('cuGraphRemoveDependencies', [FIRST_ID, [FIRST_ID + 0x10], [FIRST_ID + 0x20]]),
        frame('cuGraphRemoveDependencies', [FIRST_ID, [FIRST_ID + 0x10], [FIRST_ID + 0x10]]),
        frame('cuGraphNodeFindInClone', [FIRST_ID + 0x10, FIRST_ID + 0x70]),
        frame('cuGraphKernelNodeGetParams_v2', [FIRST_ID + 0x10]),
        frame('cuGraphKernelNodeGetParams_v2', [FIRST_ID + 0x30]),
        frame('cuGraphKernelNodeGetParams_v2', [FIRST_ID + 0xa0]),
        frame('cuGraphKernelNodeGetParams_v2', []),
        frame('cuGraphDestroyNode', [FIRST_ID + 0x20]),
        frame('cuGraphDestroyNode', [FIRST_ID + 0x20]),
        frame('cuGraphGetEdges', [FIRST_ID]),
        frame('cuGraphDebugDotPrint', [FIRST_ID]),
        frame('cuGraphDestroy', [FIRST_ID]),
        frame('cuGraphLaunch', [FIRST_ID + 0x80, CLIENT_ID + 2], flags=ASYNC),
        frame('cuMemcpyDtoH_v2', [DEV + 2048, 64, 0]))
    # edges with data (a programmatic edge from a memset refused, a default one kept, data
    # of no meaning), and a graph with a memory node moved into a child graph node: the
    # driver's rules for such graphs, a move that would hold its own parent refused
    s['graph_edges_moved'] = conversation(
        frame('cuMemAlloc_v2', [True, 4096]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphAddNode', [FIRST_ID, [], OP['cuMemsetD32Async'], [DEV, 9, 1024, 0]]),
        frame('cuGraphAddNode', [FIRST_ID, [], OP['cuMemsetD32Async'], [DEV, 7, 1024, 0]]),
        frame('cuGraphAddDependencies', [FIRST_ID, [FIRST_ID + 0x10], [FIRST_ID + 0x20],
                                         [0x10001]]),
        frame('cuGraphAddDependencies', [FIRST_ID, [FIRST_ID + 0x10], [FIRST_ID + 0x20], [0]]),
        frame('cuGraphAddDependencies', [FIRST_ID, [FIRST_ID + 0x20], [FIRST_ID + 0x10],
                                         [1 << 40]]),
        frame('cuGraphGetEdges', [FIRST_ID]),
        frame('cuGraphNodeGetDependencies', [FIRST_ID + 0x20]),
        frame('cuGraphNodeGetDependentNodes', [FIRST_ID + 0x10]),
        frame('cuGraphRemoveDependencies', [FIRST_ID, [FIRST_ID + 0x10], [FIRST_ID + 0x20],
                                            [2]]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphAddMemAllocNode', [FIRST_ID + 0x30, [], 1 << 20]),
        frame('cuGraphAddChildGraphNode', [FIRST_ID, [FIRST_ID + 0x20], FIRST_ID + 0x30, 1]),
        frame('cuGraphAddChildGraphNode', [FIRST_ID + 0x30, [], FIRST_ID, 1]),
        frame('cuGraphChildGraphNodeGetGraph', [FIRST_ID + 0x50]),
        frame('cuGraphClone', [FIRST_ID]),
        frame('cuGraphInstantiateWithFlags', [FIRST_ID, 0]),
        frame('cuGraphInstantiateWithFlags', [FIRST_ID, 0]),
        frame('cuGraphInstantiateWithFlags', [FIRST_ID + 0x30, 0]),
        frame('cuGraphAddNode', [FIRST_ID, [[FIRST_ID + 0x10, 0x10001]],
                                 OP['cuMemsetD32Async'], [DEV, 1, 16, 0]]),
        frame('cuGraphAddNode', [FIRST_ID, [[FIRST_ID + 0x20, 2], FIRST_ID + 0x10], 0, []]),
        frame('cuGraphDestroyNode', [FIRST_ID + 0x10]),
        frame('cuGraphDestroy', [FIRST_ID + 0x30]),
        frame('cuGraphDestroy', [FIRST_ID]),
        frame('cuGraphExecDestroy', [FIRST_ID + 0x60]))
    # conditional nodes (IF/ELSE with a SWITCH nested in a body), a child graph node whose
    # graph is given out and replaced in the executable graph, and a capture's graph asked
    # for and its dependencies set; a graph's conditional handles are numbered 1, 2, ...;
    # a clone of a graph with conditional nodes is refused
    s['graph_conditional'] = conversation(
        frame('cuStreamCreate', [CLIENT_ID + 2, 1], flags=ASYNC),
        frame('cuMemAlloc_v2', [True, 4096]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphConditionalHandleCreate', [FIRST_ID, 1, 1]),
        frame('cuGraphAddNode', [FIRST_ID, [], OP['cuMemsetD32Async'], [DEV, 9, 1024, 0]]),
        frame('cuGraphAddNode_v2', [FIRST_ID, [FIRST_ID + 0x10], 1, 0, 2]),
        frame('cuGraphAddNode', [FIRST_ID + 0x30, [], OP['cuMemsetD32Async'],
                                 [DEV, 1, 1024, 0]]),
        frame('cuGraphConditionalHandleCreate', [FIRST_ID + 0x30, 0, 1]),
        frame('cuGraphAddNode_v2', [FIRST_ID + 0x40, [], 2, 2, 3]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphAddNode', [FIRST_ID + 0xa0, [], OP['cuMemsetD32Async'],
                                 [DEV + 2048, 2, 256, 0]]),
        frame('cuGraphAddChildGraphNode', [FIRST_ID + 0x30, [], FIRST_ID + 0xa0]),
        frame('cuGraphChildGraphNodeGetGraph', [FIRST_ID + 0xc0]),
        frame('cuGraphInstantiateWithFlags', [FIRST_ID, 0]),
        frame('cuGraphLaunch', [FIRST_ID + 0xe0, CLIENT_ID + 2], flags=ASYNC),
        frame('cuStreamSynchronize', [CLIENT_ID + 2]),
        frame('cuGraphClone', [FIRST_ID]),
        frame('cuGraphExecUpdate_v2', [FIRST_ID + 0xe0, FIRST_ID]),
        frame('cuGraphDebugDotPrint', [FIRST_ID]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphAddChildGraphNode', [FIRST_ID + 0x100, [], FIRST_ID + 0xf0]),
        frame('cuGraphInstantiateWithFlags', [FIRST_ID + 0x100, 0]),
        frame('cuGraphExecChildGraphNodeSetParams', [FIRST_ID + 0x120, FIRST_ID + 0x110,
                                                     FIRST_ID + 0xa0]),
        frame('cuGraphExecChildGraphNodeSetParams', [FIRST_ID + 0x120, FIRST_ID + 0x110,
                                                     FIRST_ID + 0xf0]),
        frame('cuGraphLaunch', [FIRST_ID + 0x120, CLIENT_ID + 2], flags=ASYNC),
        frame('cuGraphDestroyNode', [FIRST_ID + 0x20]),
        frame('cuStreamBeginCapture_v2', [CLIENT_ID + 2, 0]),
        frame('cuMemsetD32Async', [DEV, 7, 1024, CLIENT_ID + 2], flags=ASYNC),
        frame('cuStreamGetCaptureInfo_v3', [CLIENT_ID + 2]),
        frame('cuStreamUpdateCaptureDependencies_v2', [CLIENT_ID + 2, [FIRST_ID + 0x140], 1]),
        frame('cuMemsetD32Async', [DEV, 8, 1024, CLIENT_ID + 2], flags=ASYNC),
        frame('cuStreamEndCapture', [CLIENT_ID + 2]),
        frame('cuGraphDestroy', [FIRST_ID]),
        frame('cuGraphLaunch', [FIRST_ID + 0xe0, CLIENT_ID + 2]))
    # stream memory operations: writes and waits met at once, a batch with a barrier and a
    # flush, refusals, a wait left pending when the session ends (the server meets it), a
    # graph's node of them launched
    s['memops'] = conversation(
        frame('cuMemAlloc_v2', [True, 4096]),
        frame('cuStreamCreate', [CLIENT_ID + 2, 1], flags=ASYNC),
        frame('cuStreamBatchMemOp_v2', [0, [[2, DEV, 5, 0], [1, DEV, 5, 1]]], flags=ASYNC),
        frame('cuStreamBatchMemOp_v2', [CLIENT_ID + 2, [[5, DEV + 8, 1 << 40, 0], [6, 0, 0, 1],
                                                       [3, 0, 0, 0], [4, DEV + 8, 1, 0]]]),
        frame('cuStreamBatchMemOp_v2', [0, [[2, DEV + 2, 1, 0]]]),
        frame('cuStreamBatchMemOp_v2', [0, [[1, DEV, 0, 2]]]),
        frame('cuStreamBatchMemOp_v2', [0, []]),
        frame('cuStreamBatchMemOp_v2', [CLIENT_ID + 2, [[1, DEV + 64, 9, 1]]], flags=ASYNC),
        frame('cuMemFreeAsync', [DEV, 0]),
        frame('cuGraphCreate', [0]),
        frame('cuGraphAddNode', [FIRST_ID, [], OP['cuStreamBatchMemOp_v2'],
                                 [0, [[2, DEV + 128, 4, 0], [1, DEV + 128, 4, 1]]]]),
        frame('cuGraphInstantiateWithFlags', [FIRST_ID, 0]),
        frame('cuGraphLaunch', [FIRST_ID + 0x20, 0], flags=ASYNC),
        frame('cuStreamSynchronize', [0]))
    s['host_funcs'] = conversation(
        frame('cuStreamCreate', [CLIENT_ID + 2, 0], flags=ASYNC),
        frame('cuLaunchHostFunc', [0], flags=ASYNC),
        frame('cuLaunchHostFunc', [CLIENT_ID + 2], flags=ASYNC),
        host_func_done(3),
        host_func_done(99),
        frame('cuCtxSynchronize_v2', []))
    s['shared_memory'] = conversation(
        frame('@shm_attach', [1, 65536]),
        frame('@shm_attach', [2, 4096], flags=UNSEALED),
        frame('@shm_attach', [3, 4096], flags=NO_FD),
        frame('cuMemAlloc_v2', [True, 8192]),
        frame('cuMemcpyHtoD_v2', [DEV, 4096, 0, 1, 0]),
        frame('cuMemcpyHtoDAsync_v2', [DEV + 4096, 4096, 0, 1, 4096], flags=ASYNC),
        frame('cuMemcpyDtoHAsync_v2', [DEV, 8192, 0, 1, 8192], flags=ASYNC),
        frame('cuMemcpyDtoH_v2', [DEV, 100, 0, 1, 65000]),
        frame('@shm_detach', [1]))
    s['copy_3d'] = conversation(
        frame('cuMemAllocPitch_v2', [True, True, 64, 8, 4]),
        frame('cuMemcpy3D_v2', [HTOD, 0, 64, 8, 1, None, [DEV, 0, 0, 0, 512, 8]], bytes(512)),
        frame('cuMemcpy3DAsync_v2', [DTOD, 0, 32, 4, 1, [DEV, 0, 0, 0, 512, 8],
                                     [DEV, 32, 4, 0, 512, 8]], flags=ASYNC),
        frame('cuMemcpy3D_v2', [DTOH, 0, 16, 2, 1, [DEV, 8, 1, 0, 512, 8], None]),
        frame('cuMemcpy3DAsync_v2', [DTOH, 0, 16, 2, 1, [DEV, 8, 1, 0, 512, 8], None],
              flags=ASYNC))
    s['pools'] = conversation(
        frame('cuDeviceGetDefaultMemPool', [True, 0]),
        frame('cuMemAllocAsync', [True, 4096, 0]),
        frame('cuMemPoolGetAttribute', [FIRST_ID, 3]),
        frame('cuMemPoolSetAttribute', [FIRST_ID, 4, 1 << 20]),
        frame('cuMemFreeAsync', [DEV, 0], flags=ASYNC),
        frame('cuDevicePrimaryCtxReset_v2', [0]),
        frame('cuMemGetInfo_v2', [True, True]))
    s['small_tenant_quota'] = conversation(
        frame('cuMemAlloc_v2', [True, 512 << 10]),
        frame('cuMemAlloc_v2', [True, 1 << 20]),
        frame('cuModuleLoadData', [0], ptx),
        frame('@status', []), small=True)
    # the JIT linker: logs asked for, PTX added (and text that is not), a fatbin whose
    # header claims more than came, options it refuses, a link of half a program, states
    # that are not there
    s['jit_link'] = conversation(
        frame('cuLinkCreate_v2', [[[3, 0], [4, 4096], [5, 0], [6, 1 << 30], [2, 0], [12, 1]]]),
        frame('cuLinkAddData_v2', [FIRST_ID, 1, 'a.ptx', [[7, 3]]], ptx),
        frame('cuLinkAddData_v2', [FIRST_ID, 1, 'b.ptx', []], b'.version 9.0\nnot ptx'),
        frame('cuLinkAddData_v2', [FIRST_ID, 2, 'c.fatbin', []], fatbin()[:24]),
        frame('cuLinkAddData_v2', [FIRST_ID, 9, 'd', []], b'x'),
        frame('cuLinkAddData_v2', [FIRST_ID, 1, 'e', [[17, 1]]], ptx),
        frame('cuLinkAddData_v2', [FIRST_ID, 1, 'f', [[3, 5]]], ptx),
        frame('cuLinkAddData_v2', [FIRST_ID, 1, 'x' * 5000, []], ptx),
        frame('cuLinkAddData_v2', [FIRST_ID, 1, 'g', []]),
        frame('cuLinkComplete', [FIRST_ID]),
        frame('cuLinkComplete', [FIRST_ID + 0x10]),
        frame('cuLinkCreate_v2', [[[18, 1], [19, 5]]]),
        frame('cuLinkCreate_v2', [[[4, 1 << 20], [3, 0], [4, 64], [5, 0]]]),
        frame('cuLinkAddData_v2', [FIRST_ID + 0x20, 1, 'bad.ptx', []], b'not ptx at all'),
        frame('cuLinkCreate_v2', [[[999, 0]]]),
        frame('cuLinkCreate_v2', [[[0, 1 << 40]]]),
        frame('cuLinkCreate_v2', ['options']),
        frame('cuLinkDestroy', [FIRST_ID]),
        frame('cuLinkDestroy', [FIRST_ID]),
        frame('cuLinkComplete', [FIRST_ID]))
    # NVML's view: every part, then parts it does not know, a wrong type, no body
    s['nvml'] = conversation(
        frame('cuMemAlloc_v2', [True, 1 << 20]),
        frame('@nvml', [7]),
        frame('@nvml', [2]),
        frame('@nvml', [8]),
        frame('@nvml', ['parts']),
        frame('@nvml', []))
    s['hello_refused'] = conversation(hello(token='not-a-token-of-any-tenant'),
                                      frame('cuMemGetInfo_v2', [True, True]))
    s['hello_own'] = conversation(hello(token='fuzz-token-small-tenant'),
                                  frame('@hello', {'protocol': 1}, flags=ASYNC),
                                  frame('cuCtxGetStreamPriorityRange', [True, True]))
    s['malformed'] = conversation(
        frame('cuMemGetInfo_v2', [True]),
        frame('cuMemAlloc_v2', b'\x92\xc3'),
        frame('cuMemGetInfo_v2', [True, True], flags=REPLY))
    return s


# --- the other targets -------------------------------------------------------------------


def header(magic=0x544D5243, version=1, opcode=1, flags=0, body=0, call=1, bulk=0):
    return struct.pack('<IHHIIQQ', magic, version, opcode, flags, body, call, bulk)


def frame_seeds():
    return {
        'request': header(opcode=OP['cuMemAlloc_v2'], body=4, call=7),
        'reply_partial': header(opcode=OP['cuMemcpyDtoH_v2'], flags=5, body=2, call=9,
                                bulk=8 << 20),
        'limits': header(body=4 << 20, bulk=2 << 30) + header(body=(4 << 20) + 1)
        + header(bulk=(2 << 30) + 1),
        'rejected': header(magic=0x544D5244) + header(version=2) + header(flags=8),
    }


def msgpack_seeds():
    return {
        'hello': mp({'protocol': 1, 'cuda_version': 13000, 'client': 'seed', 'pid': 42,
                     'host': 'corpus', 'program': '/seed/prog', 'token': None}),
        'launch': mp([0x10010, [1, 1, 1], [256, 1, 1], 0, 1 << 62, [[0, 8], [8, 4]],
                      [[7, bytes(64)]]]),
        'copy_3d': mp([1, 0, 64, 8, 1, None, [DEV, 0, 0, 0, 512, 8]]),
        'scalars': mp([0, -1, 127, -33, 255, 65535, 1 << 32, -(1 << 40), 1.5, True, False,
                       None, 'x' * 40, b'\x00' * 300, Ext(5, b'abcd'), Ext(-1, b'12345678')]),
        'nested': mp([[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]),
        'maps': mp({'a': {'b': {'c': [1, {'d': 'e'}]}}, 'a ': 2, 'protocol': '1', 7: 8}),
    }


def image_seeds():
    return {
        'kernels.ptx': PTX + b'\0',
        'stored.fatbin': fatbin(fatbin_entry(1, PTX + b'\0')),
        'lz4.fatbin': fatbin(fatbin_entry(1, PTX, flags=0x2011, compressed=lz4_literals(PTX),
                                          usize=len(PTX))),
        'zstd.fatbin': fatbin(fatbin_entry(1, PTX, flags=0x8011, compressed=zstd_raw(PTX),
                                           usize=len(PTX))),
        'two_containers.fatbin': fatbin(fatbin_entry(1, PTX + b'\0', arch=90, flags=0x100011),
                                        fatbin_entry(16, b'lto')) + bytes(16)
        + fatbin(fatbin_entry(2, tiny_elf())),
        'empty.cubin': tiny_elf(),
    }


# --- fuzz_tls ------------------------------------------------------------------------------

AFTER_HANDSHAKE, VERIFY, NO_CERT, ROGUE_CERT, DISTRUST = 1, 2, 4, 8, 16  # the options byte
SEAL, RAW, FLIP, REPLAY, DROP, CUT, RECORD, SWAP = range(8)  # what an op does with its bytes


def tls_input(options, reads, *ops):
    return bytes([options, reads]) + b''.join(ops)


def tls_op(kind, data, arg=0):
    return bytes([kind | arg << 3]) + struct.pack('<H', len(data)) + data


def wire_frame(op, body, bulk_len=0, call=1, flags=0):
    raw = mp(body)
    return header(opcode=OP[op], flags=flags, body=len(raw), call=call, bulk=bulk_len) + raw


def tls_seeds():
    """What a client sends after a real handshake (the target makes that), and a few
    plaintext clients on a TLS port."""
    hello = wire_frame('@hello', {'protocol': 1, 'cuda_version': 13000, 'client': 'seed',
                                  'pid': 42, 'host': 'corpus', 'program': '/seed/prog',
                                  'token': 'fuzz-token'})
    # a copy whose bulk is read straight into its buffer (the loop's direct reads: 16 KiB
    # or more to come), sent in part
    copy = wire_frame('cuMemcpyHtoD_v2', [DEV, 65536, 0], bulk_len=65536, call=2) + bytes(600)
    more = bytes(range(256)) * 2
    query = wire_frame('cuMemGetInfo_v2', [True, True], call=3)
    s = {}
    s['frames'] = tls_input(AFTER_HANDSHAKE, 0, tls_op(SEAL, hello), tls_op(SEAL, copy),
                            tls_op(SEAL, more, arg=3))
    s['frames_verify'] = tls_input(AFTER_HANDSHAKE | VERIFY, 200, tls_op(SEAL, hello),
                                   tls_op(SEAL, query), tls_op(SEAL, copy, arg=17))
    s['small_reads'] = tls_input(AFTER_HANDSHAKE, 7, tls_op(SEAL, hello, arg=5),
                                 tls_op(SEAL, query, arg=1))
    s['no_client_certificate'] = tls_input(AFTER_HANDSHAKE | VERIFY | NO_CERT, 0,
                                           tls_op(SEAL, hello))
    s['rogue_client_certificate'] = tls_input(AFTER_HANDSHAKE | VERIFY | ROGUE_CERT, 0,
                                              tls_op(SEAL, hello))
    s['client_refuses_server'] = tls_input(AFTER_HANDSHAKE | DISTRUST, 0)
    s['flipped'] = tls_input(AFTER_HANDSHAKE, 0, tls_op(SEAL, hello), tls_op(FLIP, query, arg=12))
    s['replayed'] = tls_input(AFTER_HANDSHAKE, 0, tls_op(REPLAY, hello), tls_op(SEAL, query))
    s['dropped'] = tls_input(AFTER_HANDSHAKE, 0, tls_op(DROP, hello), tls_op(SEAL, query))
    s['cut'] = tls_input(AFTER_HANDSHAKE, 30, tls_op(SEAL, hello), tls_op(CUT, query, arg=16),
                         tls_op(SEAL, query))
    s['swapped'] = tls_input(AFTER_HANDSHAKE, 0, tls_op(SWAP, hello))
    # unencrypted records after the handshake: a close_notify, a KeyUpdate, application data
    s['record_alert'] = tls_input(AFTER_HANDSHAKE | VERIFY, 0, tls_op(SEAL, hello),
                                  tls_op(RECORD, b'\x01\x00', arg=1))
    s['record_handshake'] = tls_input(AFTER_HANDSHAKE, 0, tls_op(SEAL, hello),
                                      tls_op(RECORD, b'\x18\x00\x00\x01\x01', arg=2))
    s['record_raw'] = tls_input(AFTER_HANDSHAKE, 0, tls_op(SEAL, hello),
                                tls_op(RAW, b'\x17\x03\x03\x00\x20' + bytes(32)))
    s['plaintext_hello'] = tls_input(0, 0, hello)
    s['plaintext_other'] = tls_input(0, 0, query)
    # an alert (unknown_ca) in place of a ClientHello
    s['client_alert'] = tls_input(0, 0, b'\x15\x03\x01\x00\x02\x02\x30')
    s['http'] = tls_input(0, 0, b'GET /metrics HTTP/1.1\r\nHost: fuzz.server\r\n\r\n')
    return s


def client_hello_parts(record):
    """A ClientHello record as (the body before its extensions, [(type, data)...])."""
    assert record[0] == 22 and record[5] == 1, 'not a ClientHello'
    body = record[9:5 + struct.unpack('>H', record[3:5])[0]]
    at = 2 + 32
    at += 1 + body[at]  # legacy_session_id
    at += 2 + struct.unpack('>H', body[at:at + 2])[0]  # cipher_suites
    at += 1 + body[at]  # legacy_compression_methods
    end = at + 2 + struct.unpack('>H', body[at:at + 2])[0]
    fixed, at, exts = body[:at], at + 2, []
    while at < end:
        kind, n = struct.unpack('>HH', body[at:at + 4])
        exts.append((kind, body[at + 4:at + 4 + n]))
        at += 4 + n
    return fixed, exts


def client_hello(fixed, exts):
    e = b''.join(struct.pack('>HH', kind, len(data)) + data for kind, data in exts)
    body = fixed + struct.pack('>H', len(e)) + e
    message = b'\x01' + struct.pack('>I', len(body))[1:] + body
    return b'\x16\x03\x01' + struct.pack('>H', len(message)) + message


def tls_hello_seeds(binary, out):
    """fuzz_tls seeds made of a real ClientHello, which the built target writes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'hello')
        subprocess.run([binary, '-runs=0'], env=dict(os.environ, FUZZ_TLS_HELLO=path),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        with open(path, 'rb') as f:
            hello = f.read()
    fixed, exts = client_hello_parts(hello)
    assert client_hello(fixed, exts) == hello
    versions, key_share = 43, 51
    no_shares = [(k, b'\0\0' if k == key_share else d) for k, d in exts]
    s = {
        'client_hello': tls_input(0, 0, hello),
        'client_hello_verify_bytewise': tls_input(VERIFY, 1, hello),
        # no supported_versions: a TLS 1.2 client, refused
        'client_hello_tls12': tls_input(0, 0, client_hello(fixed, [(k, d) for k, d in exts
                                                                     if k != versions])),
        # no key share: the server asks again (HelloRetryRequest), and the client's hello
        # with its share follows
        'client_hello_retry': tls_input(0, 0, client_hello(fixed, no_shares), hello),
    }
    os.makedirs(out, exist_ok=True)
    for name, data in s.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


def load_image_seeds(out, files):
    """fuzz_request seeds that load each code image (nvcc's, from the build) as a library and
    as a module, and ask for what such programs ask for first."""
    os.makedirs(out, exist_ok=True)
    for path in files:
        with open(path, 'rb') as f:
            image = f.read()
        if path.endswith('.ptx'):
            image += b'\0'  # as cuModuleLoadData gets PTX text
        if len(image) > 60000:
            continue  # beyond the target's -max_len
        seed = conversation(
            frame('cuLibraryLoadData', [0], image),
            frame('cuLibraryGetModule', [True, FIRST_ID]),
            frame('cuLibraryGetKernelCount', [True, FIRST_ID]),
            frame('cuMemGetInfo_v2', [True, True]),
            frame('cuLibraryUnload', [FIRST_ID]))
        with open(os.path.join(out, os.path.basename(path)), 'wb') as f:
            f.write(seed)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == '--load-images':
        load_image_seeds(sys.argv[2], sys.argv[3:])
        return
    if len(sys.argv) == 4 and sys.argv[1] == '--tls-hello':
        tls_hello_seeds(sys.argv[2], sys.argv[3])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'tests', 'fuzz', 'corpus')
    ptx = {'kernels.ptx': PTX}
    for target, seeds in (('fuzz_frame', frame_seeds()), ('fuzz_msgpack', msgpack_seeds()),
                          ('fuzz_image', image_seeds()), ('fuzz_request', request_seeds()),
                          ('fuzz_tls', tls_seeds()),
                          ('fuzz_ptx_load', ptx), ('fuzz_ptx_run', ptx)):
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, name), 'wb') as f:
                f.write(data)


if __name__ == '__main__':
    main()
