#!/usr/bin/env python3
"""Tenants: tokens, memory quotas, isolation between tenants, reload on SIGHUP.

A server runs with a tenants file; a real program (tenant_quota, built by nvcc) checks a
tenant's view of memory through cudart, and hand-spoken clients (wire.py) play tenants
that try to reach each other's memory and handles, as a malicious client would: the
stub's own checks are not in their way, only the server's.

  tenants_test.py --server BIN --stub DIR --opcodes codegen/opcodes.txt --program PATH
"""
import argparse
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
sys.path.insert(0, os.path.join(HERE, '..', 'robustness'))
import run  # noqa: E402
from wire import (CLIENT_ID_BASE, INVALID_HANDLE, INVALID_VALUE, SUCCESS,  # noqa: E402
                  Client, Failure, expect, read_opcodes)

OUT_OF_MEMORY = 2
INVALID_DEVICE = 101
NOT_SUPPORTED = 801
MiB = 1 << 20
TOKENS = {'alice': 'alice-token-0001', 'bob': 'bob-token-0002', 'carol': 'carol-token-0003'}
PTX = b'''.version 8.0
.target sm_75
.address_size 64
.visible .global .align 4 .b32 counter[64];
.visible .entry touch(.param .u64 p)
{
    ret;
}
\0'''


ATTR_ACCESS_POLICY_WINDOW, ATTR_PRIORITY = 1, 8  # CUlaunchAttributeID


def window(address, size=4096):
    """A CUaccessPolicyWindow over [address, address + size) as a 64-byte attribute value."""
    return struct.pack('<QQfii', address, size, 1.0, 2, 0).ljust(64, b'\0')


def write_tenants(path, entries):
    with open(path + '.tmp', 'w') as f:
        json.dump({'tenants': entries}, f)
    os.replace(path + '.tmp', path)


def tenant(name, memory, **extra):
    return dict(name=name, token=TOKENS[name], memory=memory, **extra)


def mem_info(c):
    """(result, free, total) of cuMemGetInfo_v2 through a hand-spoken client."""
    return tuple(c.call('cuMemGetInfo_v2', [True, True])[:3])


def program(args, server, token, *argv, timeout=60):
    env = run.client_env(args.stub, server.address,
                         {'CUDA_REMOTE_TOKEN': token} if token else {})
    if not token:
        env.pop('CUDA_REMOTE_TOKEN', None)
    return subprocess.run([args.program] + list(argv), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def check_tokens(args, server):
    p = program(args, server, None, 'init')
    expect('no token: cuInit fails', p.returncode, 3)
    if 'CUDA_REMOTE_TOKEN' not in p.stderr:
        raise Failure('the refusal does not say to set CUDA_REMOTE_TOKEN:\n' + p.stderr)
    p = program(args, server, 'not-a-known-token', 'init')
    expect('a wrong token: cuInit fails', p.returncode, 3)
    if 'token' not in p.stderr or 'rejected' not in p.stderr:
        raise Failure('the refusal does not say the token was rejected:\n' + p.stderr)
    if 'lost' in p.stderr:
        raise Failure('a refusal is reported as a lost connection too:\n' + p.stderr)
    print('ok: the refusals say why (%s)' % p.stderr.strip().splitlines()[-1])
    p = program(args, server, TOKENS['alice'], 'init')
    expect('the right token: cuInit works', (p.returncode, p.stdout.strip()),
           (0, 'INIT cudaSuccess'))


def check_quota_program(args, server):
    p = program(args, server, TOKENS['alice'], 'check', str(64 * MiB))
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        raise Failure('tenant_quota check failed:\n%s%s' % (p.stdout, p.stderr))
    print('ok: alice sees a 64 MiB device that holds exactly 64 MiB')


def check_quota_wire(path, ops):
    alice, bob = Client(path, ops, TOKENS['alice']), Client(path, ops, TOKENS['bob'])
    r, free, total = mem_info(alice)
    expect('alice\'s slice', (r, total), (SUCCESS, 64 * MiB))
    r, a1 = alice.call('cuMemAlloc_v2', [True, free - 4096])
    expect('alice allocates all but 4 KiB', r, SUCCESS)
    r, a2 = alice.call('cuMemAlloc_v2', [True, 4096])
    expect('and the last 4 KiB', r, SUCCESS)
    expect('one byte more is refused', alice.call('cuMemAlloc_v2', [True, 1])[0], OUT_OF_MEMORY)
    r, free_b, total_b = mem_info(bob)
    expect('bob\'s quota is his own', (r, free_b, total_b), (SUCCESS, 32 * MiB, 32 * MiB))
    r, b1 = bob.call('cuMemAlloc_v2', [True, 32 * MiB])
    expect('bob allocates all of his while alice holds all of hers', r, SUCCESS)
    expect('alice frees 4 KiB', alice.call('cuMemFree_v2', [a2]), [SUCCESS])
    expect('which she can allocate again', alice.call('cuMemAlloc_v2', [True, 4096])[0],
           SUCCESS)
    alice.sock.close()  # a client that goes away gives everything back
    bob.sock.close()


def wait_free(path, ops, token, want, seconds=10):
    deadline = time.time() + seconds
    while True:
        c = Client(path, ops, token)
        free = mem_info(c)[1]
        c.sock.close()
        if free == want or time.time() > deadline:
            return free
        time.sleep(0.1)


def check_sigkill(args, server, path, ops):
    env = run.client_env(args.stub, server.address, {'CUDA_REMOTE_TOKEN': TOKENS['alice']})
    hog = subprocess.Popen([args.program, 'hold', str(48 * MiB)], env=env,
                           stdout=subprocess.PIPE, text=True)
    line = hog.stdout.readline()
    if not line.startswith('HOLDING'):
        hog.kill()
        raise Failure('the holding client did not start: %r' % line)
    c = Client(path, ops, TOKENS['alice'])
    free = mem_info(c)[1]
    c.sock.close()
    if free > 16 * MiB:
        hog.kill()
        raise Failure('alice has %d bytes free while a client of hers holds 48 MiB' % free)
    hog.send_signal(signal.SIGKILL)
    hog.wait()
    expect('the memory of a killed client goes back to its tenant',
           wait_free(path, ops, TOKENS['alice'], 64 * MiB), 64 * MiB)


def check_isolation(path, ops):
    """Bob, speaking the protocol himself, goes for alice's memory and handles."""
    alice, bob = Client(path, ops, TOKENS['alice']), Client(path, ops, TOKENS['bob'])
    pattern = bytes((i * 13 + 5) & 0xff for i in range(1 << 16))
    r, a = alice.call('cuMemAlloc_v2', [True, len(pattern)])
    expect('alice allocates', r, SUCCESS)
    expect('alice writes', alice.call('cuMemcpyHtoD_v2', [a, len(pattern), 0], bulk=pattern),
           [SUCCESS])
    stream, event = CLIENT_ID_BASE + 0x10, CLIENT_ID_BASE + 0x20
    alice.send_async('cuStreamCreate', [stream, 1])
    alice.send_async('cuEventCreate', [event, 0])
    r, module = alice.call('cuModuleLoadData', [3], bulk=PTX)
    expect('alice loads code', r, SUCCESS)
    r, function = alice.call('cuModuleGetFunction', [True, module, 'touch'])
    expect('alice finds her kernel', r, SUCCESS)
    r, glob = alice.call('cuModuleGetGlobal_v2', [True, True, module, 'counter'])[:2]
    expect('alice finds her global', r, SUCCESS)
    expect('alice writes her global',
           alice.call('cuMemcpyHtoD_v2', [glob, 256, 0], bulk=pattern[:256]), [SUCCESS])

    r, mine = bob.call('cuMemAlloc_v2', [True, 1 << 16])
    expect('bob allocates his own', r, SUCCESS)
    attempts = [
        ('cuMemcpyDtoH_v2', [a, 4096, 0], b'', INVALID_VALUE),
        ('cuMemcpyDtoH_v2', [a + 4096, 16, 0], b'', INVALID_VALUE),
        ('cuMemcpyDtoH_v2', [glob, 16, 0], b'', INVALID_VALUE),
        ('cuMemcpyHtoD_v2', [a, 16, 0], b'\0' * 16, INVALID_VALUE),
        ('cuMemcpyHtoD_v2', [glob, 16, 0], b'\0' * 16, INVALID_VALUE),
        ('cuMemcpyHtoD_v2', [mine + (1 << 16) - 8, 16, 0], b'\0' * 16, INVALID_VALUE),
        ('cuMemcpyDtoD_v2', [mine, a, 4096, 0], b'', INVALID_VALUE),
        ('cuMemcpyDtoD_v2', [a, mine, 4096, 0], b'', INVALID_VALUE),
        ('cuMemcpyDtoDAsync_v2', [a, mine, 16, 0], b'', INVALID_VALUE),
        ('cuMemsetD8_v2', [a, 0, 16, 0], b'', INVALID_VALUE),
        ('cuMemsetD16_v2', [a, 0, 8, 0], b'', INVALID_VALUE),
        ('cuMemsetD32_v2', [a, 0, 4, 0], b'', INVALID_VALUE),
        ('cuMemsetD32_v2', [mine + (1 << 16) - 8, 0, 4, 0], b'', INVALID_VALUE),
        ('cuMemsetD8Async', [glob, 0, 16, 0], b'', INVALID_VALUE),
        ('cuMemsetD2D8_v2', [a, 256, 0, 16, 4, 0], b'', INVALID_VALUE),
        ('cuMemsetD2D16_v2', [a, 256, 0, 8, 4, 0], b'', INVALID_VALUE),
        ('cuMemsetD2D32_v2', [a, 256, 0, 4, 4, 0], b'', INVALID_VALUE),
        ('cuMemFree_v2', [a], b'', INVALID_VALUE),
        ('cuMemFreeAsync', [a, 0], b'', INVALID_VALUE),
        ('cuMemcpy3D_v2', [3, 0, 64, 2, 1, [a, 0, 0, 0, 256, 2], [mine, 0, 0, 0, 256, 2]], b'',
         INVALID_VALUE),
        ('cuMemcpy3D_v2', [3, 0, 64, 2, 1, [mine, 0, 0, 0, 256, 2], [a, 0, 0, 0, 256, 2]], b'',
         INVALID_VALUE),
        ('cuStreamSetAttribute', [0, ATTR_ACCESS_POLICY_WINDOW, window(a)], b'', INVALID_VALUE),
        ('cuStreamSynchronize', [stream], b'', INVALID_HANDLE),
        ('cuStreamQuery', [stream], b'', INVALID_HANDLE),
        ('cuEventQuery', [event], b'', INVALID_HANDLE),
        ('cuEventRecord', [event, 0], b'', INVALID_HANDLE),
        ('cuStreamWaitEvent', [0, event, 0], b'', INVALID_HANDLE),
        ('cuEventDestroy_v2', [event], b'', INVALID_HANDLE),
        ('cuStreamDestroy_v2', [stream], b'', INVALID_HANDLE),
        ('cuModuleGetFunction', [True, module, 'touch'], b'', INVALID_HANDLE),
        ('cuModuleGetGlobal_v2', [True, True, module, 'counter'], b'', INVALID_HANDLE),
        ('cuModuleUnload', [module], b'', INVALID_HANDLE),
        ('cuLaunchKernel', [function, [1, 1, 1], [1, 1, 1], 0, 0, [[0, 8]]],
         struct.pack('<Q', a), INVALID_HANDLE),
    ]
    for op, body, bulk, want in attempts:
        got = bob.call(op, body, bulk=bulk)[0]
        if got != want:
            raise Failure('bob\'s %s %r: got %d, expected %d' % (op, body, got, want))
    print('ok: %d attempts on alice\'s memory and handles refused' % len(attempts))
    expect('alice may put an L2 window over her own memory',
           alice.call('cuStreamSetAttribute', [0, ATTR_ACCESS_POLICY_WINDOW, window(a)]),
           [SUCCESS])

    # a graph is checked at every launch: bob captures work on alice's memory
    own_stream = CLIENT_ID_BASE + 0x30
    bob.send_async('cuStreamCreate', [own_stream, 1])
    expect('bob cannot capture alice\'s stream',
           bob.call('cuStreamBeginCapture_v2', [stream, 0])[0], INVALID_HANDLE)
    expect('bob captures on his own stream',
           bob.call('cuStreamBeginCapture_v2', [own_stream, 0]), [SUCCESS])
    bob.send_async('cuMemsetD8Async', [a, 0, 16, own_stream])
    bob.send_async('cuMemcpyDtoDAsync_v2', [mine, a, 4096, own_stream])
    r, graph = bob.call('cuStreamEndCapture', [own_stream])[:2]
    expect('the capture ends', r, SUCCESS)
    r, exec_ = bob.call('cuGraphInstantiateWithFlags', [graph, 0])[:2]
    expect('the graph is instantiated', r, SUCCESS)
    bob.send_async('cuGraphLaunch', [exec_, own_stream])
    expect('its launch is refused node by node',
           bob.call('cuStreamSynchronize', [own_stream])[0], INVALID_VALUE)
    bob.send_async('cuGraphLaunch', [exec_ + 0x10, own_stream])
    expect('an executable graph he does not have: refused',
           bob.call('cuStreamSynchronize', [own_stream])[0], INVALID_VALUE)
    print('ok: a graph on alice\'s memory is refused at its launch')

    expect('alice\'s memory is intact', (alice.call('cuMemcpyDtoH_v2', [a, len(pattern), 0]),
                                         alice.last_bulk == pattern), ([SUCCESS], True))
    expect('alice\'s global is intact', (alice.call('cuMemcpyDtoH_v2', [glob, 256, 0]),
                                         alice.last_bulk == pattern[:256]), ([SUCCESS], True))
    alice.send_async('cuEventRecord', [event, stream])
    expect('alice\'s stream and event still work', alice.call('cuStreamSynchronize', [stream]),
           [SUCCESS])
    expect('bob\'s own memory works', bob.call('cuMemsetD8_v2', [mine, 7, 1 << 16, 0]),
           [SUCCESS])
    alice.sock.close()
    bob.sock.close()


# CUmemAllocationProp (pinned, on device 0) with its one pointer set: the server must clear
# it, never follow it; CUmemAccessDesc (device 0, read-write)
VMM_PROP = struct.pack('<iiiiQQ', 1, 0, 1, 0, 0xdeadbeefdeadbeef, 0)
VMM_ACCESS = struct.pack('<iii', 1, 0, 3)
PIECE = 2 * MiB


def check_vmm(args, server, path, ops):
    """The virtual-memory API: a tenant's quota exact (vmm.cu under alice's 64 MiB), and bob
    going for alice's reservation, physical memory and mapped range."""
    env = run.client_env(args.stub, server.address, {'CUDA_REMOTE_TOKEN': TOKENS['alice']})
    p = subprocess.run([args.vmm_program, str(64 * MiB)], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 0:
        raise Failure('vmm under alice\'s quota failed:\n%s%s' % (p.stdout, p.stderr))
    expect('vmm: 32 pieces of 2 MiB fit alice\'s 64 MiB, the next refused',
           'quota of %d bytes: 32 pieces of %d created' % (64 * MiB, PIECE) in p.stdout, True)

    alice, bob = Client(path, ops, TOKENS['alice']), Client(path, ops, TOKENS['bob'])
    r, base = alice.call('cuMemAddressReserve', [True, 2 * PIECE, 0, 0, 0])[:2]
    expect('alice reserves 4 MiB of addresses', r, SUCCESS)
    other_device = struct.pack('<iiiiQQ', 1, 0, 1, 1, 0, 0)  # location: device 1
    fabric = struct.pack('<iiiiQQ', 1, 8, 1, 0, 0, 0)        # a handle to share across machines
    exportable = struct.pack('<iiiiQQ', 1, 1, 1, 0, 0, 0)    # a POSIX descriptor, as PyTorch asks
    expect('physical memory of a device the client does not have: refused',
           alice.call('cuMemCreate', [True, PIECE, other_device, 0])[0], INVALID_DEVICE)
    expect('a fabric handle: not remoted',
           alice.call('cuMemCreate', [True, PIECE, fabric, 0])[0], NOT_SUPPORTED)
    expect('neither refusal charged the quota', mem_info(alice)[1], 64 * MiB)
    r, handle = alice.call('cuMemCreate', [True, PIECE, exportable, 0])[:2]
    expect('memory exportable as a descriptor is made', r, SUCCESS)
    expect('and charged', mem_info(alice)[1], 64 * MiB - PIECE)
    expect('its export is not remoted',
           alice.call('cuMemExportToShareableHandle', [True, handle, 1, 0])[0], NOT_SUPPORTED)
    expect('it is released', alice.call('cuMemRelease', [handle])[0], SUCCESS)
    expect('and its quota given back', mem_info(alice)[1], 64 * MiB)
    r, handle = alice.call('cuMemCreate', [True, PIECE, VMM_PROP, 0])[:2]
    expect('alice creates 2 MiB of physical memory', r, SUCCESS)
    expect('which her quota counts', mem_info(alice)[1], 64 * MiB - PIECE)
    expect('alice maps it', alice.call('cuMemMap', [base, PIECE, 0, handle, 0]), [SUCCESS])
    expect('and may use it', alice.call('cuMemSetAccess', [base, PIECE, VMM_ACCESS, 1]),
           [SUCCESS])
    pattern = bytes((i * 29 + 3) & 0xff for i in range(4096))
    expect('alice writes her mapped memory',
           alice.call('cuMemcpyHtoD_v2', [base, len(pattern), 0], bulk=pattern), [SUCCESS])
    r, own = bob.call('cuMemAddressReserve', [True, PIECE, 0, 0, 0])[:2]
    expect('bob reserves his own', r, SUCCESS)
    r, bobs = bob.call('cuMemCreate', [True, PIECE, VMM_PROP, 0])[:2]
    expect('bob creates his own', r, SUCCESS)
    attempts = [
        ('cuMemMap', [base + PIECE, PIECE, 0, bobs, 0]),  # into alice's reservation
        ('cuMemMap', [own, PIECE, 0, handle + 1, 0]),      # an id he does not have
        ('cuMemUnmap', [base, PIECE]),
        ('cuMemAddressFree', [base, 2 * PIECE]),
        ('cuMemSetAccess', [base, PIECE, VMM_ACCESS, 1]),
        ('cuMemcpyDtoH_v2', [base, 16, 0]),
        ('cuMemsetD8_v2', [base, 0, 16, 0]),
        ('cuMemRelease', [handle + 1]),
        ('cuMemMap', [base, PIECE, 0, bobs, 0]),           # over alice's mapping
    ]
    for op, body in attempts:
        got = bob.call(op, body)[0]
        if got != INVALID_VALUE:
            raise Failure('bob\'s %s %r: got %d, expected %d' % (op, body, got, INVALID_VALUE))
    print('ok: %d attempts on alice\'s virtual memory refused' % len(attempts))
    expect('alice\'s mapped memory is intact',
           (alice.call('cuMemcpyDtoH_v2', [base, len(pattern), 0]),
            alice.last_bulk == pattern), ([SUCCESS], True))
    expect('alice unmaps and releases', (alice.call('cuMemUnmap', [base, PIECE]),
                                         alice.call('cuMemRelease', [handle])),
           ([SUCCESS], [SUCCESS]))
    expect('her quota has it back', mem_info(alice)[1], 64 * MiB)
    expect('bob maps his own', bob.call('cuMemMap', [own, PIECE, 0, bobs, 0]), [SUCCESS])
    bob.sock.close()  # a client that goes away unmaps, releases and frees
    alice.sock.close()
    expect('bob\'s quota has all of it back once he left',
           wait_free(path, ops, TOKENS['bob'], 32 * MiB), 32 * MiB)


def check_graph_memory(path, ops):
    """A graph's allocation nodes count against the quota exactly: at once, refused past
    it, given back once the graph that frees the memory and its executable graph are gone,
    kept (the program's to free) when no node frees it; bob can neither free nor reach it.
    The same for stream-ordered allocations in a capture."""
    alice, bob = Client(path, ops, TOKENS['alice']), Client(path, ops, TOKENS['bob'])
    r, graph = alice.call('cuGraphCreate', [0])[:2]
    expect('alice creates a graph', r, SUCCESS)
    r, node, ptr = alice.call('cuGraphAddMemAllocNode', [graph, [], 48 * MiB])[:3]
    expect('her graph allocates 48 MiB', r, SUCCESS)
    expect('which her quota counts at once', mem_info(alice)[1], 16 * MiB)
    expect('a node past her quota: refused',
           alice.call('cuGraphAddMemAllocNode', [graph, [node], 32 * MiB])[0], OUT_OF_MEMORY)
    expect('the refusal charged nothing', mem_info(alice)[1], 16 * MiB)
    expect('the graph\'s memory is hers to use',
           alice.call('cuMemsetD8_v2', [ptr, 7, 4096, 0]), [SUCCESS])
    r, bobs = bob.call('cuGraphCreate', [0])[:2]
    expect('bob\'s graph may not free it',
           bob.call('cuGraphAddMemFreeNode', [bobs, [], ptr])[0], INVALID_VALUE)
    expect('nor may bob write it', bob.call('cuMemsetD8_v2', [ptr, 0, 16, 0])[0], INVALID_VALUE)
    r, freeing = alice.call('cuGraphAddMemFreeNode', [graph, [node], ptr])[:2]
    expect('her graph frees it', r, SUCCESS)
    r, exe = alice.call('cuGraphInstantiateWithFlags', [graph, 0])[:2]
    expect('and is instantiated', r, SUCCESS)
    alice.send_async('cuGraphLaunch', [exe, 0])
    expect('and launched', alice.call('cuStreamSynchronize', [0]), [SUCCESS])
    expect('the graph destroyed', alice.call('cuGraphDestroy', [graph]), [SUCCESS])
    expect('its executable graph still holds the memory', mem_info(alice)[1], 16 * MiB)
    expect('the executable graph destroyed', alice.call('cuGraphExecDestroy', [exe]), [SUCCESS])
    expect('her quota has the 48 MiB back', wait_free(path, ops, TOKENS['alice'], 64 * MiB),
           64 * MiB)
    r, kept = alice.call('cuGraphCreate', [0])[:2]
    r, node, kept_ptr = alice.call('cuGraphAddMemAllocNode', [kept, [], 8 * MiB])[:3]
    expect('a graph with no free node', alice.call('cuGraphDestroy', [kept]), [SUCCESS])
    expect('leaves its memory to the program', mem_info(alice)[1], 56 * MiB)
    expect('which frees it', alice.call('cuMemFree_v2', [kept_ptr]), [SUCCESS])
    expect('and has it back', mem_info(alice)[1], 64 * MiB)
    stream = CLIENT_ID_BASE + 0x30  # the same through a capture's stream-ordered calls
    alice.send_async('cuStreamCreate', [stream, 1])
    expect('alice captures', alice.call('cuStreamBeginCapture_v2', [stream, 0]), [SUCCESS])
    r, captured_ptr = alice.call('cuMemAllocAsync', [True, 40 * MiB, stream])[:2]
    expect('an allocation in the capture', r, SUCCESS)
    expect('charged at once', mem_info(alice)[1], 24 * MiB)
    expect('one past her quota: refused',
           alice.call('cuMemAllocAsync', [True, 32 * MiB, stream])[0], OUT_OF_MEMORY)
    alice.send_async('cuMemFreeAsync', [captured_ptr, stream])
    r, captured = alice.call('cuStreamEndCapture', [stream])[:2]
    expect('the capture ends with the allocation and its free', r, SUCCESS)
    expect('the graph destroyed', alice.call('cuGraphDestroy', [captured]), [SUCCESS])
    expect('her quota has the 40 MiB back', wait_free(path, ops, TOKENS['alice'], 64 * MiB),
           64 * MiB)
    alice.sock.close()
    bob.sock.close()


def check_reload(server, path, ops, tenants_file):
    alice = Client(path, ops, TOKENS['alice'])
    r, a = alice.call('cuMemAlloc_v2', [True, 8 * MiB])
    expect('alice holds 8 MiB across the reload', r, SUCCESS)
    refused = Client(path, ops, TOKENS['carol'], expect_refusal=True)
    expect('carol is not a tenant yet', refused.hello[0] != SUCCESS, True)
    write_tenants(tenants_file, [tenant('alice', '64MiB', weight=1),
                                 tenant('bob', '48MiB', weight=3, priority='high'),
                                 tenant('carol', '16MiB', priority='low')])
    server.proc.send_signal(signal.SIGHUP)
    server.wait_for(r'tenants reloaded from .*: 3 tenants')
    carol = Client(path, ops, TOKENS['carol'])
    expect('carol\'s slice after the reload', mem_info(carol)[2], 16 * MiB)
    expect('bob\'s new quota', mem_info(Client(path, ops, TOKENS['bob']))[2], 48 * MiB)
    r, free, total = mem_info(alice)
    expect('alice\'s session and usage carried on', (r, free, total),
           (SUCCESS, 56 * MiB, 64 * MiB))
    with open(tenants_file, 'w') as f:
        f.write('{"tenants": [{"name": "alice"')  # broken: the current tenants stay
    server.proc.send_signal(signal.SIGHUP)
    server.wait_for(r'tenants not reloaded')
    expect('a broken file changes nothing', Client(path, ops, TOKENS['carol']).hello[0],
           SUCCESS)




def check_priorities(server, path, ops):
    """After the reload bob is high, carol low, alice normal: their streams get the
    emulated device's greatest priority (-5), its least (0), and what alice asks for, -5
    excepted (left to high tenants); so do their launches on the default stream."""
    r, least, greatest = Client(path, ops, TOKENS['alice']).call(
        'cuCtxGetStreamPriorityRange', [True, True])
    expect('the emulated device\'s priority range', (r, least, greatest), (SUCCESS, 0, -5))
    want = {'alice': (0, -3, -4), 'bob': (-5, -5, -5), 'carol': (0, 0, 0)}
    grids = {'bob': 2, 'carol': 3}
    for name, (default, asked3, asked5) in want.items():
        c = Client(path, ops, TOKENS[name])
        base = CLIENT_ID_BASE + 0x100
        c.send_async('cuStreamCreate', [base, 1])
        c.send_async('cuStreamCreateWithPriority', [base + 0x10, 1, -3])
        c.send_async('cuStreamCreateWithPriority', [base + 0x20, 1, -5])
        got = tuple(c.call('cuStreamGetPriority', [sid, True])[1]
                    for sid in (base, base + 0x10, base + 0x20))
        expect('%s\'s streams: default, asked -3, asked -5' % name, got,
               (default, asked3, asked5))
        # a stream attribute may not raise a priority past what the tenant may have
        asked = struct.pack('<i', -5).ljust(64, b'\0')
        expect('%s sets a stream\'s priority attribute to -5' % name,
               c.call('cuStreamSetAttribute', [base, ATTR_PRIORITY, asked]), [SUCCESS])
        r = c.call('cuStreamGetAttribute', [base, ATTR_PRIORITY])[0]
        got = struct.unpack('<i', c.last_body[-64:][:4])[0] if r == SUCCESS else None
        expect('and has %d' % asked5, (r, got), (SUCCESS, asked5))
        if name in grids:
            r, module = c.call('cuModuleLoadData', [3], bulk=PTX)
            r, function = c.call('cuModuleGetFunction', [True, module, 'touch'])
            expect('%s launches on the default stream' % name,
                   c.call('cuLaunchKernel', [function, [grids[name], 1, 1], [1, 1, 1], 0, 0,
                                             [[0, 8]]], bulk=struct.pack('<Q', 0))[0], SUCCESS)
            expect('and synchronizes', c.call('cuCtxSynchronize_v2', []), [SUCCESS])
        c.sock.close()
    if not os.path.exists(server.trace_path):  # only the emulated device records launches
        print('(a GPU: the priorities of launches on the default stream are not traced)')
        return
    launches = {t['grid'][0]: t['priority'] for t in server.trace() if t['kernel'] == 'touch'}
    expect('the trace: bob\'s launch at -5, carol\'s at 0', (launches.get(2), launches.get(3)),
           (-5, 0))


def check_graph_after_free(path, ops):
    """Alice's graph, launched once (the server then runs it as the driver's graph), names
    memory she frees and bob is given: her later launches fail and never write his bytes."""
    alice, bob = Client(path, ops, TOKENS['alice']), Client(path, ops, TOKENS['bob'])
    size = 1 << 20
    r, buf = alice.call('cuMemAlloc_v2', [True, size])
    expect('alice allocates', r, SUCCESS)
    stream = CLIENT_ID_BASE + 0x40
    alice.send_async('cuStreamCreate', [stream, 1])
    expect('alice captures', alice.call('cuStreamBeginCapture_v2', [stream, 0]), [SUCCESS])
    alice.send_async('cuMemsetD8Async', [buf, 0x5a, size, stream])
    r, graph = alice.call('cuStreamEndCapture', [stream])[:2]
    expect('a graph of one memset', r, SUCCESS)
    r, exe = alice.call('cuGraphInstantiateWithFlags', [graph, 0])[:2]
    expect('instantiated', r, SUCCESS)
    alice.send_async('cuGraphLaunch', [exe, stream])
    expect('and launched', alice.call('cuStreamSynchronize', [stream]), [SUCCESS])
    expect('it wrote her memory', alice.call('cuMemcpyDtoH_v2', [buf, 16, 0]), [SUCCESS])
    expect('her bytes', alice.last_bulk, b'\x5a' * 16)
    expect('alice frees the memory', alice.call('cuMemFree_v2', [buf]), [SUCCESS])
    # the device takes the memory back once the work queued before the free is done, which
    # a loaded machine may delay: bob asks again until he is given those bytes
    for _ in range(100):
        r, mine = bob.call('cuMemAlloc_v2', [True, size])
        if r != SUCCESS or mine == buf:
            break
        bob.call('cuMemFree_v2', [mine])
        time.sleep(0.05)
    expect('bob is given the same memory', (r, mine), (SUCCESS, buf))
    expect('bob writes it', bob.call('cuMemsetD8_v2', [mine, 0x42, size, 0]), [SUCCESS])
    for _ in range(2):
        alice.send_async('cuGraphLaunch', [exe, stream])
        r = alice.call('cuStreamSynchronize', [stream])[0]
        expect('her graph on memory she freed fails', r != SUCCESS, True)
    expect('bob reads his memory', bob.call('cuMemcpyDtoH_v2', [mine, size, 0]), [SUCCESS])
    expect('his bytes, untouched', bob.last_bulk == b'\x42' * size, True)
    alice.sock.close()
    bob.sock.close()


def test(server, args, tenants_file):
    ops = read_opcodes(args.opcodes)
    path = server.address[len('unix:'):]
    check_tokens(args, server)
    check_quota_program(args, server)
    check_quota_wire(path, ops)
    expect('a tenant whose clients left has all of its quota again',
           wait_free(path, ops, TOKENS['alice'], 64 * MiB), 64 * MiB)
    check_sigkill(args, server, path, ops)
    check_isolation(path, ops)
    wait_free(path, ops, TOKENS['alice'], 64 * MiB)  # her clients' sessions ended
    check_vmm(args, server, path, ops)
    wait_free(path, ops, TOKENS['alice'], 64 * MiB)
    check_graph_memory(path, ops)
    wait_free(path, ops, TOKENS['alice'], 64 * MiB)
    check_graph_after_free(path, ops)
    wait_free(path, ops, TOKENS['alice'], 64 * MiB)
    check_reload(server, path, ops, tenants_file)
    check_priorities(server, path, ops)
    if 'alice-token' in server.log_text() or 'bob-token' in server.log_text():
        raise Failure('a token appears in the server log')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True)
    ap.add_argument('--opcodes', required=True)
    ap.add_argument('--program', required=True)
    ap.add_argument('--vmm-program', required=True)
    args = ap.parse_args()
    files = []

    def setup(workdir):
        files.append(os.path.join(workdir, 'tenants.json'))
        write_tenants(files[0], [tenant('alice', '64MiB'), tenant('bob', 32 * MiB)])
        return ['--tenants', files[0]]

    return run.with_server('tenants_test.py', args.server,
                           lambda server: test(server, args, files[0]), extra=setup,
                           errors=(Failure, AssertionError, ConnectionError, OSError,
                                   subprocess.TimeoutExpired))


if __name__ == '__main__':
    sys.exit(main())
