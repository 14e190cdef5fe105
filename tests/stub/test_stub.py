#!/usr/bin/env python3
"""Checks the stub's local layer without a server: the export list against NVIDIA's stub
and the manifest, cuGetProcAddress for every (name, version, variant) of cudaTypedefs.h,
the export tables, and calls that must work (or fail properly) before cuInit.

  test_stub.py STUB_SO MANIFEST_JSON [NVIDIA_STUB_SO]
"""
import ctypes
import json
import os
import subprocess
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def exports(path):
    out = subprocess.check_output(['nm', '-D', '--defined-only', path], text=True)
    return {line.split()[-1] for line in out.splitlines() if ' T ' in line or ' R ' in line}


def main():
    stub_path, manifest_path = sys.argv[1], sys.argv[2]
    nvidia = sys.argv[3] if len(sys.argv) > 3 else None
    with open(manifest_path) as f:
        manifest = json.load(f)

    ours = exports(stub_path)
    wanted = {fn['name'] for fn in manifest['functions']}
    check(wanted <= ours, 'manifest functions not exported: %s' % sorted(wanted - ours)[:10])
    if nvidia and os.path.exists(nvidia):
        theirs = {s for s in exports(nvidia)}
        check(theirs <= ours, "NVIDIA's exports missing: %s" % sorted(theirs - ours)[:10])
        check(len(theirs) == 637, 'NVIDIA stub has %d exports, the contract says 637'
              % len(theirs))
    # our marker, and the entry of cuda-remote's NVML library (client/nvml_view.c)
    extra = ours - wanted - {'cr_remote_stub_version', 'cr_remote_nvml_view'}
    check(not extra, 'unexpected exports: %s' % sorted(extra)[:10])
    # its threads outlive a dlclose (cudart unloads the driver when cuInit fails)
    dynamic = subprocess.check_output(['readelf', '-d', stub_path], text=True)
    check('NODELETE' in dynamic, 'the stub is not marked NODELETE')

    lib = ctypes.CDLL(stub_path)
    CUresult = ctypes.c_int
    gpa = lib.cuGetProcAddress_v2
    gpa.restype = CUresult
    gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                    ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]

    def lookup(name, version, flags):
        fn, status = ctypes.c_void_p(), ctypes.c_int(-1)
        r = gpa(name.encode(), ctypes.byref(fn), version, flags, ctypes.byref(status))
        return r, fn.value, status.value

    def address(symbol):
        return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value

    # every PFN typedef resolves to its own symbol, exactly at its version
    by_name = {}
    for p in manifest['procs']:
        by_name.setdefault((p['name'], p['variant']), []).append(p)
    checked = 0
    for (name, variant), entries in by_name.items():
        entries.sort(key=lambda e: e['version'])
        flags = 2 if variant else 0
        for i, e in enumerate(entries):
            r, fn, st = lookup(name, e['version'], flags)
            check(r == 0 and st == 0 and fn == address(e['symbol']),
                  '%s@%d%s -> %s (r=%d st=%d)' % (name, e['version'], variant,
                                                  hex(fn or 0), r, st))
            # a newer version than asked for is never returned; an in-between version
            # gets the entry below it
            nxt = entries[i + 1]['version'] if i + 1 < len(entries) else None
            if nxt is None or nxt > e['version'] + 1:
                r, fn, st = lookup(name, e['version'] + 1, flags)
                check(fn == address(e['symbol']), '%s@%d+1 -> wrong symbol' % (name,
                                                                                e['version']))
            checked += 1
        first = entries[0]['version']
        if not variant:
            r, fn, st = lookup(name, first - 1, 0)
            check(r == 500 and fn is None and st == 2,
                  '%s below its first version: r=%d st=%d' % (name, r, st))
    check(checked == len(manifest['procs']), 'checked %d of %d' % (checked,
                                                                  len(manifest['procs'])))
    # the contract's examples: same name, different ABI by version
    check(lookup('cuCtxSynchronize', 2000, 0)[1] == address('cuCtxSynchronize'), 'v2000')
    check(lookup('cuCtxSynchronize', 13000, 0)[1] == address('cuCtxSynchronize_v2'), 'v13000')
    check(lookup('cuGetProcAddress', 11030, 0)[1] == address('cuGetProcAddress'), 'gpa 11030')
    check(lookup('cuGetProcAddress', 12000, 0)[1] == address('cuGetProcAddress_v2'), 'gpa 12k')
    check(lookup('cuMemcpyAsync', 13000, 2)[1] == address('cuMemcpyAsync_ptsz'), 'ptsz')
    check(lookup('cuMemcpyAsync', 13000, 1)[1] == address('cuMemcpyAsync'), 'legacy flag')
    check(lookup('cuMemAlloc', 13000, 2)[1] == address('cuMemAlloc_v2'), 'no ptds variant')
    r, fn, st = lookup('', 0, 0)
    check(r != 0 and fn is None and st == 1, 'empty name: r=%d st=%d' % (r, st))
    r, fn, st = lookup('cuNoSuchFunction', 13000, 0)
    check(r == 500 and st == 1, 'unknown name: r=%d st=%d' % (r, st))
    r, fn, st = lookup('cuInit', 13000, 4)
    check(r == 1, 'unknown flags: r=%d' % r)

    # export tables
    get_table = lib.cuGetExportTable
    get_table.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    tables = {
        'f8cff95121468b4eb9e2fb469e7c0dd9': None, '6bd5fb6c5bf4e74a8987d93912fd9df9': 104,
        'a094798c2e742e7493f20800200c0a66': 56, '42d85a8123f6cb478298f6e78a3aecdc': 32,
        'c693336e1121df11a8c368f355d89593': None, '263e88607cd2614392f6bbd5006dfa7e': 32,
        'd4082055bde6704b8d34ba123c66e1f2': 24,
    }
    for uuid, size in tables.items():
        t = ctypes.c_void_p()
        r = get_table(ctypes.byref(t), bytes.fromhex(uuid))
        check(r == 0 and t.value, 'export table %s: r=%d' % (uuid, r))
        if r == 0 and size is not None:
            slot0 = ctypes.cast(t, ctypes.POINTER(ctypes.c_uint64))[0]
            check(slot0 == size, 'table %s size slot %d, expected %d' % (uuid, slot0, size))
    t = ctypes.c_void_p()
    check(get_table(ctypes.byref(t), b'\x01' * 16) == 500 and not t.value, 'unknown table')

    # before cuInit
    version = ctypes.c_int()
    check(lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value == 13000,
          'cuDriverGetVersion %d' % version.value)
    count = ctypes.c_int(-1)
    check(lib.cuDeviceGetCount(ctypes.byref(count)) == 3, 'cuDeviceGetCount before cuInit')
    check(lib.cuMemAlloc_v2(ctypes.byref(ctypes.c_uint64()), 8) == 3, 'cuMemAlloc before cuInit')
    name = ctypes.c_char_p()
    check(lib.cuGetErrorName(1, ctypes.byref(name)) == 0 and
          name.value == b'CUDA_ERROR_INVALID_VALUE', 'cuGetErrorName')
    check(lib.cuGetErrorString(100, ctypes.byref(name)) == 0 and b'device' in name.value,
          'cuGetErrorString')
    check(lib.cuGetErrorName(123456, ctypes.byref(name)) == 1, 'unknown error name')
    check(lib.cuInit(1) == 1, 'cuInit(1) must be invalid')

    for f in failures:
        print('FAILED:', f, file=sys.stderr)
    print('%d exports, %d cuGetProcAddress entries, %d failures' % (len(ours), checked,
                                                                    len(failures)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
