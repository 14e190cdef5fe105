#!/usr/bin/env python3
"""The generator's rules: what the annotations must say, and what it makes of them.

Runs codegen/generate.py on the committed inputs and on copies with one annotation
changed, and checks that it refuses each mistake with a message naming it, and that the
tables it writes carry the rules (device-pointer extents, protocol messages, bulk limits).

Usage: test_generate.py CODEGEN_DIR"""
import os
import re
import subprocess
import sys
import tempfile

CODEGEN = sys.argv[1]
failures = []


def check(what, ok, detail=''):
    print('%s: %s' % ('ok' if ok else 'FAILED', what))
    if not ok:
        failures.append(what)
        if detail:
            print(detail)


def generate(annotations=None, opcodes=None):
    """Runs the generator, with replaced annotation or opcode text; (rc, stderr, outdir)."""
    tmp = tempfile.mkdtemp(prefix='cr-gen-')
    paths = {}
    for name, text in (('annotations.txt', annotations), ('opcodes.txt', opcodes)):
        paths[name] = os.path.join(CODEGEN, name)
        if text is not None:
            paths[name] = os.path.join(tmp, name)
            with open(paths[name], 'w') as f:
                f.write(text)
    out = os.path.join(tmp, 'out')
    p = subprocess.run([sys.executable, os.path.join(CODEGEN, 'generate.py'),
                        '--manifest', os.path.join(CODEGEN, 'manifest.json'),
                        '--annotations', paths['annotations.txt'],
                        '--opcodes', paths['opcodes.txt'], '--out', out],
                       capture_output=True, text=True)
    return p.returncode, p.stderr, out


def read(path):
    with open(path) as f:
        return f.read()


ANNOTATIONS = read(os.path.join(CODEGEN, 'annotations.txt'))
OPCODES = read(os.path.join(CODEGEN, 'opcodes.txt'))


def edited(pattern, replacement):
    text, n = re.subn(pattern, replacement, ANNOTATIONS, count=1, flags=re.M)
    assert n == 1, pattern
    return text


def refused(what, annotations=None, opcodes=None, says=''):
    rc, err, _ = generate(annotations, opcodes)
    check(what, rc != 0 and says in err, 'rc %d, stderr:\n%s' % (rc, err))


# --- the committed inputs, and what the tables say ----------------------------------
rc, err, out = generate()
check('the committed annotations generate', rc == 0, err)
desc = read(os.path.join(out, 'cr_api_desc.c'))
dispatch = read(os.path.join(out, 'cr_dispatch.c'))
numbers = {name: i + 1 for i, name in enumerate(
    l.split('#', 1)[0].strip() for l in OPCODES.splitlines()
    if l.split('#', 1)[0].strip())}


def param_row(fn, param):
    m = re.search(r'params_%s\[\] = \{\n(.*?)\n\};' % fn, desc, re.S)
    rows = [r for r in m.group(1).splitlines() if r.endswith(' /* %s */' % param)]
    return rows[0].strip()[:-len(' /* %s */' % param)] if rows else ''


def rule(name):
    m = re.search(r'\[%d\] = \{([^}]*)\},' % numbers[name],
                  desc.split('cr_opcode_rule(unsigned opcode)')[1].split('};')[0])
    return m.group(1) if m else None


check('a memset reaches N 4-byte elements',
      param_row('cuMemsetD32Async', 'dstDevice') ==
      '{CR_P_DPTR, 0, CR_HT_NONE, 2, 8, CR_EXTENT_COUNT, 4, -1, -1, NULL},',
      param_row('cuMemsetD32Async', 'dstDevice'))
check('a 2D memset reaches Height rows dstPitch apart of Width 2-byte elements',
      param_row('cuMemsetD2D16Async', 'dstDevice') ==
      '{CR_P_DPTR, 0, CR_HT_NONE, 3, 8, CR_EXTENT_ROWS, 2, 1, 4, NULL},',
      param_row('cuMemsetD2D16Async', 'dstDevice'))
check('both pointers of a device-to-device copy reach ByteCount bytes',
      param_row('cuMemcpyDtoDAsync_v2', 'srcDevice') ==
      param_row('cuMemcpyDtoDAsync_v2', 'dstDevice') ==
      '{CR_P_DPTR, 0, CR_HT_NONE, 2, 8, CR_EXTENT_COUNT, 1, -1, -1, NULL},')
check('an enum by value names the values it may take, the _MAX sentinel not among them',
      param_row('cuFuncSetAttribute', 'attrib') ==
      '{CR_P_VAL, CR_PF_SIGNED, CR_HT_NONE, -1, 4, CR_EXTENT_NONE, 0, -1, -1, '
      '&cr_enum_CUfunction_attribute},' and
      'values_CUfunction_attribute[] = {%s};' % ', '.join(str(i) for i in range(16)) in desc,
      param_row('cuFuncSetAttribute', 'attrib'))
check('a launch is bounded by the parameter bytes and marked a launch',
      rule('cuLaunchKernel') == 'CR_MAX_LAUNCH_PARAM_BYTES, CR_OPR_LAUNCH', rule('cuLaunchKernel'))
check('a copy up is bounded by one chunk', rule('cuMemcpyHtoD_v2') == 'CR_COPY_CHUNK, 0',
      rule('cuMemcpyHtoD_v2'))
check('a generic call carries no bulk', rule('cuStreamQuery') == '0, 0', rule('cuStreamQuery'))
check('the hello is the first message', rule('@hello') == '0, CR_OPR_MESSAGE | CR_OPR_FIRST',
      rule('@hello'))
check('host-function answers are taken on the loop',
      rule('@host_func_done') == '0, CR_OPR_MESSAGE | CR_OPR_ON_LOOP', rule('@host_func_done'))
check('a shared-memory region comes with its descriptor',
      rule('@shm_attach') == '0, CR_OPR_MESSAGE | CR_OPR_PASSES_FD', rule('@shm_attach'))
check('what only the server sends has no rule (a client may not send it)',
      rule('@d2h_data') is None and rule('@context_error') is None and rule('@goodbye') is None)
check('messages are routed to their handlers',
      '[%d] = {cr_srv_status, NULL, NULL}' % numbers['@status'] in dispatch and
      '[%d] = {cr_srv_host_func_done, NULL, NULL}' % numbers['@host_func_done'] in dispatch and
      'cr_srv_d2h_data' not in dispatch)

# --- mistakes the generator refuses --------------------------------------------------
refused('a device pointer without an extent',
        edited(r'(^cuMemsetD8Async\s.*?)\s+dstDevice:extent\[N\]', r'\1'),
        says='cuMemsetD8Async.dstDevice: a device pointer needs its extent')
refused('an extent naming no parameter',
        edited(r'dstDevice:extent\[N\*4\]', 'dstDevice:extent[Count*4]'),
        says='no parameter Count')
refused('an element size other than 1, 2 or 4',
        edited(r'dstDevice:extent\[N\*2\]', 'dstDevice:extent[N*3]'),
        says='a device pointer needs its extent')
refused('rows naming no pitch',
        edited(r'dstDevice:rows\[dstPitch,Width\*4,Height\]', 'dstDevice:rows[pitch,Width*4,Height]'),
        says='no parameter pitch')
refused('an extent on a value that is no device pointer',
        edited(r'(^cuMemsetD32Async\s.*)$', r'\1  N:extent[N]'),
        says='a value parameter takes no annotation')
refused('a protocol message left out',
        edited(r'^@status\s.*$', ''), says='annotate the protocol message @status')
refused('a protocol message of no kind',
        edited(r'^(@status\s+)message$', r'\1sometimes'), says='message, notice or reserved')
refused('an attribute a notice cannot have',
        edited(r'^(@d2h_data\s+)notice$', r'\1notice  loop'), says='unknown attribute loop')
refused('a message with no opcode',
        ANNOTATIONS + '@farewell                               message\n',
        says='@farewell has no opcode')

if failures:
    print('test_generate.py: FAILED: %d check(s): %s' % (len(failures), ', '.join(failures)))
    sys.exit(1)
print('test_generate.py: all checks passed')
