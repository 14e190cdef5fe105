#!/usr/bin/env python3
"""The private export tables (cuGetExportTable) as the stub serves them against a server:
every table of common/export_tables.h, the sizes the server reports for its driver, the
slots the stub implements (context and stream ids, the tools TLS, per-stream handles) and
every other slot answering CUDA_ERROR_NOT_SUPPORTED and naming itself once; a table the
server's driver lacks is CUDA_ERROR_NOT_FOUND. It also scans the CUDA libraries installed
here for every UUID the list knows, prints which library holds which, checks the facts the
design relies on (cuBLASLt asks for the tools-context table), and asks the stub for each.

  export_tables.py --server BIN --stub LIBCUDA --header common/export_tables.h
                   [--driver LIB] [--cuda-root /usr/local/cuda]

With --driver the server runs its `cuda` backend on that library (the emulated device
packaged as a driver, which has none of the libraries' tables).
"""
import argparse
import ctypes
import glob
import json
import mmap
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
import run  # noqa: E402

SUCCESS, NOT_FOUND, NOT_SUPPORTED = 0, 500, 801
CUDART_TABLES = {'ERROR_SINK', 'RUNTIME', 'TOOLS_HOOKS', 'TOOLS_TLS', 'CONTEXT_STORAGE',
                 'CONTEXT_CHECKS', 'INTEGRITY'}


def read_header(path):
    """[(name, has_size, emu_slots, uuid bytes)] from the X-macro list."""
    text = open(path).read()
    rows = []
    for m in re.finditer(r'X\((\w+), (\d), (\d+), ((?:0x[0-9a-f]{2},?\s*\\?\s*){16})\)', text):
        uuid = bytes(int(b, 16) for b in re.findall(r'0x([0-9a-f]{2})', m.group(4)))
        rows.append((m.group(1), int(m.group(2)), int(m.group(3)), uuid))
    if len(rows) < 8:
        raise SystemExit('read only %d tables from %s' % (len(rows), path))
    return rows


def scan_libraries(cuda_root, tables):
    """{table name: {library: occurrences}} over the CUDA libraries installed here."""
    libs = sorted(set(glob.glob(os.path.join(cuda_root, 'lib64', 'lib*.so.*[0-9]')) +
                      glob.glob('/usr/lib/x86_64-linux-gnu/libcudnn*.so.*[0-9]') +
                      glob.glob('/usr/lib/x86_64-linux-gnu/libnccl*.so.*[0-9]')))
    found = {name: {} for name, _, _, _ in tables}
    for lib in libs:
        if os.path.islink(lib):
            continue
        with open(lib, 'rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            for name, _, _, uuid in tables:
                n, at = 0, m.find(uuid)
                while at >= 0:
                    n += 1
                    at = m.find(uuid, at + 1)
                if n:
                    found[name][os.path.basename(lib)] = n
    return found


# --- the client side, in a child process (the stub reads its environment at cuInit) -----------

MODULE_PTX = b"""
.version 8.0
.target sm_52
.address_size 64
.visible .entry set_value(.param .u64 p, .param .u32 v)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}
.visible .entry other()
{
    ret;
}
\0"""


def check_module_functions(lib, tm, check):
    """Tools-module slot 7 (cuFFT's planning): each function of a module handed to a callback
    as an object whose memory may be read, which then works as that CUfunction."""
    mod = ctypes.c_void_p()
    check(lib.cuModuleLoadData(ctypes.byref(mod), MODULE_PTX) == SUCCESS, 'a module of two kernels')
    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
    walk = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, callback,
                            ctypes.c_void_p)(tm[7])
    seen = []
    cb = callback(lambda user, obj, owner: seen.append((obj, owner)))
    count = walk(None, mod, cb, None)
    names = sorted(ctypes.string_at(owner).decode() for _, owner in seen)
    check(count == 2 and len(seen) == 2 and names == ['other', 'set_value'],
          'slot 7: each function once, with its name (%d: %s)' % (count, names))
    again = []
    walk(None, mod, callback(lambda user, obj, owner: again.append((obj, owner))), None)
    check(sorted(o for o, _ in again) == sorted(o for o, _ in seen) and all(o for o, _ in seen),
          'the same objects each time')
    obj = [o for o, owner in seen if ctypes.string_at(owner) == b'set_value'][0]
    check(ctypes.c_uint32.from_address(obj + 0x370).value == 2 and
          ctypes.c_uint64.from_address(obj).value == 0x100000001,
          'an object of the layout cuFFT reads')
    fn = ctypes.c_void_p()
    attr, attr_obj = ctypes.c_int(), ctypes.c_int()
    check(lib.cuModuleGetFunction(ctypes.byref(fn), mod, b'set_value') == SUCCESS and
          lib.cuFuncGetAttribute(ctypes.byref(attr), 0, fn) == SUCCESS and
          lib.cuFuncGetAttribute(ctypes.byref(attr_obj), 0, ctypes.c_void_p(obj)) == SUCCESS and
          attr.value == attr_obj.value > 0, 'the object is the function for cuFuncGetAttribute')
    dptr = ctypes.c_uint64()
    value = ctypes.c_uint32(0x5eed)
    out = ctypes.c_uint32()
    args = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(dptr), ctypes.c_void_p),
                                 ctypes.cast(ctypes.byref(value), ctypes.c_void_p))
    check(lib.cuMemAlloc_v2(ctypes.byref(dptr), 4) == SUCCESS and
          lib.cuLaunchKernel(ctypes.c_void_p(obj), 1, 1, 1, 1, 1, 1, 0, None, args, None) ==
          SUCCESS and lib.cuMemcpyDtoH_v2(ctypes.byref(out), dptr, 4) == SUCCESS and
          out.value == 0x5eed, 'and for cuLaunchKernel (%#x)' % out.value)
    lib.cuMemFree_v2(dptr)
    lib.cuModuleUnload(mod)


def child(stub, tables, expect_served):
    lib = ctypes.CDLL(stub)
    failures = []

    def check(cond, what):
        print(('ok: ' if cond else 'FAILED: ') + what)
        if not cond:
            failures.append(what)

    get = lib.cuGetExportTable
    get.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    check(lib.cuInit(0) == SUCCESS, 'cuInit')
    dev = ctypes.c_int()
    ctx = ctypes.c_void_p()
    check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == SUCCESS and
          lib.cuCtxSetCurrent(ctx) == SUCCESS, 'a current context')
    served = {}
    for name, has_size, emu_slots, uuid in tables:
        t = ctypes.c_void_p()
        r = get(ctypes.byref(t), uuid)
        want = name in CUDART_TABLES or name in expect_served
        check((r == SUCCESS and bool(t.value)) == want and (want or r == NOT_FOUND),
              'table %s: %s (%d)' % (name, 'served' if want else 'not found', r))
        if r != SUCCESS:
            continue
        slots = ctypes.cast(t, ctypes.POINTER(ctypes.c_void_p))
        count = (slots[0] // 8) if has_size else emu_slots
        if name in expect_served and has_size:
            check(slots[0] == expect_served[name],
                  'table %s is the size the server reported (%d bytes)' % (name,
                                                                          expect_served[name]))
        check(all(slots[i] for i in range(1 if has_size else 0, count)),
              'table %s: each of its %d slots is a function' % (name, count))
        served[name] = slots
    if 'TOOLS_CONTEXT' in served:
        tc = served['TOOLS_CONTEXT']
        u64 = ctypes.c_ulonglong
        ctx_id = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(u64))(tc[4])
        a, b, c = u64(), u64(), u64()
        check(ctx_id(None, ctypes.byref(a)) == SUCCESS and ctx_id(ctx, ctypes.byref(b)) == 0
              and a.value == b.value, 'slot 4: the current context\'s id (%d)' % a.value)
        check(lib.cuCtxGetId(ctx, ctypes.byref(c)) == SUCCESS and c.value == a.value,
              'slot 4 is cuCtxGetId')
        other = ctypes.c_void_p()
        check(lib.cuCtxCreate_v2(ctypes.byref(other), 0, 0) == SUCCESS and
              ctx_id(other, ctypes.byref(b)) == SUCCESS and b.value != a.value,
              'another context has another id')
        lib.cuCtxDestroy_v2(other)
        lib.cuCtxSetCurrent(ctx)
        device = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                  ctypes.POINTER(ctypes.c_int))(tc[3])
        dev.value = -1
        check(device(ctx, ctypes.byref(dev)) == SUCCESS and dev.value == 0,
              'slot 3: the context\'s device')
        s1, s2 = ctypes.c_void_p(), ctypes.c_void_p()
        check(lib.cuStreamCreate(ctypes.byref(s1), 0) == 0 and
              lib.cuStreamCreate(ctypes.byref(s2), 0) == 0, 'two streams')
        stream_id = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.POINTER(u64))(tc[39])
        ids = [u64() for _ in range(4)]
        check(stream_id(None, s1, ctypes.byref(ids[0])) == 0 and
              stream_id(ctx, s2, ctypes.byref(ids[1])) == 0 and
              stream_id(None, None, ctypes.byref(ids[2])) == 0 and
              stream_id(None, s1, ctypes.byref(ids[3])) == 0,
              'slot 39: stream ids')
        check(len({ids[0].value, ids[1].value, ids[2].value}) == 3 and
              ids[3].value == ids[0].value, 'distinct per stream and stable')
        check(lib.cuStreamGetId(s1, ctypes.byref(a)) == 0 and a.value == ids[0].value,
              'slot 39 is cuStreamGetId')
        handle = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint8)(tc[51])
        h = [ctypes.c_void_p() for _ in range(3)]
        check(handle(None, s1, ctypes.byref(h[0]), 1) == 0 and
              handle(None, s2, ctypes.byref(h[1]), 1) == 0 and
              handle(None, s1, ctypes.byref(h[2]), 1) == 0 and h[0].value and
              h[0].value == h[2].value and h[0].value != h[1].value,
              'slot 51: a handle per stream')
        check(ctypes.string_at(h[1].value + 8, 56) == bytes(56), 'of zeroed memory')
        back = u64()
        check(stream_id(None, h[0].value, ctypes.byref(back)) == 0 and
              back.value == ids[0].value, 'slot 39 takes the handle back: the stream\'s id')
        pt = ctypes.c_void_p()
        check(handle(None, None, ctypes.byref(pt), 1) == 0 and pt.value and
              pt.value != h[0].value and
              stream_id(None, pt.value, ctypes.byref(back)) == 0 and
              back.value not in (ids[0].value, ids[1].value, ids[2].value),
              'NULL with the per-thread flag is the per-thread stream')
        unknown = ctypes.CFUNCTYPE(ctypes.c_int)(tc[7])
        check(unknown() == NOT_SUPPORTED and unknown() == NOT_SUPPORTED,
              'an unknown slot answers CUDA_ERROR_NOT_SUPPORTED')
        last = ctypes.CFUNCTYPE(ctypes.c_int)(tc[tc[0] // 8 - 1])
        check(last() == NOT_SUPPORTED, 'so does the last slot')
    if 'TOOLS_MODULE' in served:
        check_module_functions(lib, served['TOOLS_MODULE'], check)
    hooks = served['TOOLS_HOOKS']
    hook_ctx = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_ulonglong))(hooks[4])
    hook_stream = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.POINTER(ctypes.c_ulonglong))(hooks[3])
    x, y = ctypes.c_ulonglong(), ctypes.c_ulonglong()
    check(hook_ctx(None, ctypes.byref(x)) == 0 and lib.cuCtxGetId(ctx, ctypes.byref(y)) == 0 and
          x.value == y.value, 'tools hooks slot 4: the context\'s id')
    check(hook_stream(None, None, ctypes.byref(x)) == 0 and
          lib.cuStreamGetId(None, ctypes.byref(y)) == 0 and x.value == y.value,
          'tools hooks slot 3: the stream\'s id')
    tls = served['TOOLS_TLS']
    get_ctx = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))(tls[2])
    got = ctypes.c_void_p()
    check(get_ctx(ctypes.byref(got)) == SUCCESS and got.value == ctx.value,
          'tools TLS slot 2 writes the calling thread\'s current context')
    set_ctx = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(tls[1])
    check(set_ctx(None) == SUCCESS and get_ctx(ctypes.byref(got)) == SUCCESS and not got.value,
          'tools TLS slot 1 sets it')
    set_ctx(ctx)
    return 1 if failures else 0


def test(server, args, tables):
    expect = {} if args.driver else {name: slots * 8 for name, _, slots, _ in tables
                                     if slots and name not in CUDART_TABLES}
    env = run.client_env(os.path.dirname(args.stub), server.address,
                         {'CUDA_REMOTE_LOG': 'info'})
    p = subprocess.run([sys.executable, __file__, '--child', '--stub', args.stub, '--header',
                        args.header, '--expect', json.dumps(expect)],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=60)
    print(p.stdout, end='')
    if p.returncode != 0:
        raise run.Failure('the client\'s checks failed:\n' + p.stderr)
    if expect:
        said = re.findall(r'export table TOOLS_CONTEXT \(21318c60-97143248-\.\.\.\) slot (\d+) '
                          r'is not implemented', p.stderr)
        if sorted(said) != ['7', '94']:
            raise run.Failure('unknown slots must name themselves once each: %s\n%s'
                              % (said, p.stderr))
        print('ok: each unknown slot said once which it is')
    if 'UNKNOWN_69A28E9F' not in expect and 'no export table 69a28e9f' not in p.stderr:
        raise run.Failure('a table the driver lacks was not reported:\n' + p.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server')
    ap.add_argument('--stub', required=True)
    ap.add_argument('--header', required=True)
    ap.add_argument('--driver')
    ap.add_argument('--cuda-root', default=os.environ.get('CUDA_HOME', '/usr/local/cuda'))
    ap.add_argument('--child', action='store_true')
    ap.add_argument('--expect', default='{}')
    args = ap.parse_args()
    tables = read_header(args.header)
    if args.child:
        return child(args.stub, tables, json.loads(args.expect))

    if not args.driver:  # once is enough: the libraries are the same for both backends
        found = scan_libraries(args.cuda_root, tables)
        for name, libs in found.items():
            print('%-18s %s' % (name, ', '.join('%s x%d' % kv for kv in sorted(libs.items()))
                                or '(in no library here)'))
        if not any(k.startswith('libcublasLt') for k in found['TOOLS_CONTEXT']):
            print('FAILED: libcublasLt does not hold the tools-context UUID', file=sys.stderr)
            return 1
        print('ok: cuBLASLt asks for the tools-context table')
    extra = ['--backend', 'cuda', '--driver', args.driver] if args.driver else []
    return run.with_server('export_tables.py', args.server, lambda s: test(s, args, tables),
                           extra=extra, errors=(run.Failure, subprocess.TimeoutExpired))


if __name__ == '__main__':
    sys.exit(main())
