#!/usr/bin/env python3
"""Extracts the manifest of the CUDA driver API from the installed headers.

Reads cuda.h and cudaProfiler.h (every function the driver library exports, with its real
ABI; the legacy and per-thread-stream variants come from compiling the headers the way the
driver itself does, with __CUDA_API_VERSION_INTERNAL) and cudaTypedefs.h with
cudaProfilerTypedefs.h (every PFN_<name>_v<version>[_ptds|_ptsz], which is what
cuGetProcAddress resolves), and writes
codegen/manifest.json. The generator (generate.py) reads only the manifest, so a build needs
no libclang; `cmake --build build --target check-manifest` runs this script again and fails
if the result differs from the committed file.

Usage: extract_manifest.py [--cuda DIR] [--stub LIBCUDA_STUB] [--output FILE | --check FILE]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

try:
    import clang.cindex as ci
except ImportError:
    sys.exit("extract_manifest.py: needs libclang's Python binding "
             "(Debian: python3-clang-14, run with /usr/bin/python3)")

PFN_RE = re.compile(r'^PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?$')


def find_libclang():
    for path in ('/usr/lib/llvm-14/lib/libclang-14.so.1', '/usr/lib/llvm-14/lib/libclang.so.1'):
        if os.path.exists(path):
            return path
    return None


def parse(index, header, include, defines):
    args = ['-x', 'c', '-std=c11', '-I' + include] + ['-D' + d for d in defines]
    tu = index.parse(header, args=args)
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        sys.exit('extract_manifest.py: %s: %s' % (header, errors[0]))
    return tu


def type_info(t):
    """What the generator needs to know of one C type."""
    canon = t.get_canonical()
    info = {'type': t.spelling, 'canonical': canon.spelling}
    size = canon.get_size()
    if size > 0:
        info['size'] = size
    if canon.kind == ci.TypeKind.POINTER:
        pointee = canon.get_pointee()
        decl_pointee = t.get_pointee() if t.kind == ci.TypeKind.POINTER else pointee
        if pointee.kind in (ci.TypeKind.FUNCTIONPROTO, ci.TypeKind.FUNCTIONNOPROTO):
            info['kind'] = 'funcptr'
        elif pointee.kind == ci.TypeKind.RECORD and pointee.get_size() < 0:
            info['kind'] = 'handle'          # pointer to an opaque struct: CUstream, CUevent...
        else:
            info['kind'] = 'pointer'
            p = {'type': decl_pointee.spelling, 'canonical': pointee.spelling,
                 'const': pointee.is_const_qualified()}
            psize = pointee.get_size()
            if psize > 0:
                p['size'] = psize
            if pointee.kind == ci.TypeKind.POINTER:
                pp = pointee.get_pointee()
                p['kind'] = 'handle' if (pp.kind == ci.TypeKind.RECORD and pp.get_size() < 0) \
                    else 'pointer'
            elif pointee.kind == ci.TypeKind.RECORD:
                p['kind'] = 'struct'
            elif pointee.kind == ci.TypeKind.ENUM:
                p['kind'] = 'enum'
            elif pointee.kind in (ci.TypeKind.FLOAT, ci.TypeKind.DOUBLE):
                p['kind'] = 'float'
            elif pointee.kind == ci.TypeKind.VOID:
                p['kind'] = 'void'
            elif pointee.kind == ci.TypeKind.CONSTANTARRAY:
                p['kind'] = 'array'
            else:
                p['kind'] = 'int'
            info['pointee'] = p
    elif canon.kind == ci.TypeKind.RECORD:
        info['kind'] = 'struct'
    elif canon.kind == ci.TypeKind.ENUM:
        info['kind'] = 'enum'
    elif canon.kind in (ci.TypeKind.FLOAT, ci.TypeKind.DOUBLE):
        info['kind'] = 'float'
    elif canon.kind == ci.TypeKind.VOID:
        info['kind'] = 'void'
    else:
        info['kind'] = 'int'
        info['signed'] = canon.kind in (ci.TypeKind.INT, ci.TypeKind.LONG, ci.TypeKind.LONGLONG,
                                        ci.TypeKind.SHORT, ci.TypeKind.SCHAR,
                                        ci.TypeKind.CHAR_S)
    return info


def signature(arg_types):
    return tuple(t.get_canonical().spelling for t in arg_types)


def symbol_version(name, base, variant):
    """cuFoo -> 1, cuFoo_v2 -> 2 (for the given _ptds/_ptsz variant)."""
    stem = name[:len(name) - len(variant)] if variant else name
    rest = stem[len(base):]
    return 1 if rest == '' else int(rest[2:])


def extract(cuda):
    include = os.path.join(cuda, 'include')
    lib = find_libclang()
    if lib and not ci.Config.loaded:
        ci.Config.set_library_file(lib)
    index = ci.Index.create()

    # Every exported function: the public declarations, plus the legacy and per-thread
    # variants that the headers only declare for the driver's own build.
    functions = {}
    for header in ('cuda.h', 'cudaProfiler.h'):
        for defines in ([], ['__CUDA_API_VERSION_INTERNAL'], ['CUDA_API_PER_THREAD_DEFAULT_STREAM']):
            tu = parse(index, os.path.join(include, header), include, defines)
            for c in tu.cursor.get_children():
                if c.kind != ci.CursorKind.FUNCTION_DECL or not c.spelling.startswith('cu'):
                    continue
                if not c.location.file or not c.location.file.name.startswith(include):
                    continue
                if c.is_definition():
                    continue                 # static inline helpers in the headers
                entry = {
                    'name': c.spelling,
                    'return': type_info(c.result_type),
                    'params': [dict(name=a.spelling, **type_info(a.type))
                               for a in c.get_arguments()],
                }
                old = functions.get(c.spelling)
                if old and [p['canonical'] for p in old['params']] != \
                        [p['canonical'] for p in entry['params']]:
                    sys.exit('extract_manifest.py: two signatures for %s' % c.spelling)
                functions.setdefault(c.spelling, entry)

    # cuGetProcAddress: every PFN typedef names (function, ABI version, variant) and a
    # signature; map each to the exported symbol of that signature. Where several versions
    # share a signature (cuCtxCreate 2000 and 3020), the k-th version is the k-th symbol.
    # (cudaProfilerTypedefs.h holds the profiler's: cudart looks up cuProfilerStart too)
    by_name = collections.defaultdict(list)
    for header in ('cudaTypedefs.h', 'cudaProfilerTypedefs.h'):
        tu = parse(index, os.path.join(include, header), include,
                   ['__CUDA_API_VERSION_INTERNAL'])
        for c in tu.cursor.get_children():
            if c.kind != ci.CursorKind.TYPEDEF_DECL:
                continue
            m = PFN_RE.match(c.spelling)
            if not m:
                continue
            fn = c.underlying_typedef_type.get_canonical().get_pointee()
            by_name[(m.group(1), m.group(3) or '')].append(
                (int(m.group(2)), signature(fn.argument_types())))
    procs = []
    for (base, variant), versions in sorted(by_name.items()):
        versions.sort()
        sym_re = re.compile(re.escape(base) + r'(_v\d+)?' + re.escape(variant) + '$')
        candidates = sorted((n for n in functions if sym_re.match(n)),
                            key=lambda n: symbol_version(n, base, variant))
        for version, sig in versions:
            same_sig = [n for n in candidates
                        if tuple(p['canonical'] for p in functions[n]['params']) == sig]
            peers = [v for v, s in versions if s == sig]
            if len(same_sig) == 1:
                symbol = same_sig[0]
            elif len(same_sig) == len(peers):
                symbol = same_sig[peers.index(version)]
            else:
                sys.exit('extract_manifest.py: cannot map PFN_%s_v%d%s to one of %s'
                         % (base, version, variant, same_sig))
            procs.append({'name': base, 'version': version, 'variant': variant,
                          'symbol': symbol})

    # CUresult names and their one-line descriptions, for cuGetErrorName/cuGetErrorString.
    tu = parse(index, os.path.join(include, 'cuda.h'), include, [])
    errors = []
    for c in tu.cursor.walk_preorder():
        if c.kind == ci.CursorKind.ENUM_DECL and c.spelling == 'cudaError_enum':
            for e in c.get_children():
                brief = ' '.join((e.brief_comment or '').split())
                errors.append({'name': e.spelling, 'value': e.enum_value, 'brief': brief})
            break

    # The values of every enum a function takes by value, so that the server refuses any
    # other before the driver sees it (NVIDIA's driver has crashed on one: a function
    # attribute of -1). A trailing _MAX sentinel is no value.
    by_value = {p['canonical'] for f in functions.values() for p in f['params']
                if p['kind'] == 'enum' and p['canonical'].startswith('enum ')}
    enums = []
    for c in tu.cursor.walk_preorder():
        if c.kind != ci.CursorKind.ENUM_DECL or c.type.get_canonical().spelling not in by_value:
            continue
        consts = [(e.spelling, e.enum_value) for e in c.get_children()
                  if e.kind == ci.CursorKind.ENUM_CONSTANT_DECL]
        if not consts or any(x['canonical'] == c.type.get_canonical().spelling for x in enums):
            continue
        top = max(v for _, v in consts)
        values = sorted({v for n, v in consts
                         if not (n.endswith('_MAX') and v == top and len(consts) > 1)})
        enums.append({'canonical': c.type.get_canonical().spelling, 'values': values})
    enums.sort(key=lambda x: x['canonical'])

    version = None
    with open(os.path.join(include, 'cuda.h')) as f:
        m = re.search(r'#define CUDA_VERSION (\d+)', f.read())
        version = int(m.group(1))
    return {
        'comment': 'generated by codegen/extract_manifest.py from the CUDA headers: do not edit',
        'cuda_version': version,
        'functions': [functions[n] for n in sorted(functions)],
        'procs': procs,
        'errors': errors,
        'enums': enums,
    }


def dump(manifest):
    """JSON with one function or proc entry per line, so diffs read per function."""
    lines = ['{']
    for key, value in manifest.items():
        if isinstance(value, list):
            lines.append(' %s: [' % json.dumps(key))
            lines.append(',\n'.join('  ' + json.dumps(v, separators=(',', ':')) for v in value))
            lines.append(' ],' if key != list(manifest)[-1] else ' ]')
        else:
            lines.append(' %s: %s,' % (json.dumps(key), json.dumps(value)))
    lines.append('}')
    return '\n'.join(lines) + '\n'


def stub_exports(stub):
    out = subprocess.check_output(['nm', '-D', '--defined-only', stub], text=True)
    return {line.split()[-1] for line in out.splitlines() if ' T ' in line}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--cuda', default=os.environ.get('CUDA_HOME', '/usr/local/cuda'))
    ap.add_argument('--stub', help="NVIDIA's stub libcuda.so to compare the export list with")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument('--output')
    g.add_argument('--check')
    args = ap.parse_args()

    manifest = extract(args.cuda)
    stub = args.stub or os.path.join(args.cuda, 'lib64', 'stubs', 'libcuda.so')
    if os.path.exists(stub):
        names = {f['name'] for f in manifest['functions']}
        exports = stub_exports(stub)
        if names != exports:
            sys.exit('extract_manifest.py: headers and %s disagree: only in headers %s, '
                     'only in the stub %s' % (stub, sorted(names - exports)[:10],
                                              sorted(exports - names)[:10]))
    text = dump(manifest)
    if args.output:
        with open(args.output, 'w') as f:
            f.write(text)
        print('wrote %s: %d functions, %d proc entries'
              % (args.output, len(manifest['functions']), len(manifest['procs'])))
        return
    with open(args.check) as f:
        committed = f.read()
    if committed != text:
        sys.exit('extract_manifest.py: %s differs from what the installed headers give; '
                 'run codegen/extract_manifest.py --output %s and review the diff'
                 % (args.check, args.check))
    print('manifest up to date: %d functions, %d proc entries'
          % (len(manifest['functions']), len(manifest['procs'])))


if __name__ == '__main__':
    main()
