#!/usr/bin/env python3
"""scripts/check-modules.py: refuses a tree whose modules call each other in a cycle, and
passes the project's own tree. Usage: check_modules_test.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
script = os.path.join(root, 'scripts', 'check-modules.py')


def run(tree):
    return subprocess.run([sys.executable, script, tree], capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    for folder, files in {'server': {'a.c': 'int cr_a(void) { return cr_b(); }\n',
                                     'b.c': 'int cr_b(void) { return cr_c(); }\n',
                                     'c.c': 'int cr_c(void) { return cr_a(); }\n',
                                     'd.c': 'int cr_d(void) { return cr_a(); }\n'},
                          'client': {'conn.c': 'int cr_x(void) { return cr_y(); }\n',
                                     'conn_read.c': 'int cr_y(void) { return cr_x(); }\n'}}.items():
        os.makedirs(os.path.join(tmp, folder))
        for name, text in files.items():
            with open(os.path.join(tmp, folder, name), 'w') as f:
                f.write(text)
    p = run(tmp)
    if p.returncode != 1 or 'the modules a, b, c call each other' not in p.stdout or \
            ' d' in p.stdout.split('call each other')[0]:
        sys.exit('a cycle a -> b -> c -> a was not reported as it should be:\n' + p.stdout)
    if 'client/: 1 modules in layers' not in p.stdout:  # conn.c and conn_read.c are one
        sys.exit('the files of one module were taken as two:\n' + p.stdout)

p = run(root)
if p.returncode != 0:
    sys.exit('the project\'s modules call each other in a cycle:\n' + p.stdout)
print(p.stdout, end='')
print('check_modules_test.py: all checks passed')
