#!/usr/bin/env python3
"""Runs a program that uses NVIDIA's libraries through the stub against an emulated device.

Starts cuda-remoted --backend emu --emu-compute-capability CC (the libraries' PTX is for
a given capability: cuBLAS 13's for 12.0), runs the program through the stub and requires
that it exits 0 and that every `CR_EXPECT_LOG <regex>` line it prints matches the server's
log (the program records there why a routine stops: the kernel, the PTX instruction).

  run.py --server BIN --stub DIR [--compute-capability X.Y] [--timeout S] PROGRAM [ARGS...]
"""
import argparse
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                                'integration'))
from run import Failure, Server, client_env, run_program  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True, help='folder holding libcuda.so.1')
    ap.add_argument('--compute-capability', default='12.0')
    ap.add_argument('--timeout', type=float, default=100)
    ap.add_argument('program', nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if not args.program:
        ap.error('no program')
    with tempfile.TemporaryDirectory(prefix='cr-libraries-') as workdir:
        server = None
        try:
            server = Server(args.server, workdir, 'unix',
                            extra=['--emu-compute-capability', args.compute_capability])
            started = time.time()
            p = run_program(args.program, client_env(args.stub, server.address),
                            args.timeout)
            sys.stdout.write(p.stdout)
            sys.stderr.write(p.stderr)
            if p.returncode != 0:
                raise Failure('%s exited with %d' % (os.path.basename(args.program[0]),
                                                     p.returncode))
            # the server logs a launch's fault on the stream's thread, which may come a
            # moment after the client saw the error
            patterns = [line[len('CR_EXPECT_LOG '):] for line in p.stdout.splitlines()
                        if line.startswith('CR_EXPECT_LOG ')]
            deadline = time.time() + 5
            for pattern in patterns:
                while not re.search(pattern, server.log_text(), re.M):
                    if time.time() > deadline:
                        raise Failure('the server log does not match %r' % pattern)
                    time.sleep(0.05)
            if server.proc.poll() is not None:
                raise Failure('the server died')
            print('run.py: %s behaved as recorded in %.1f s (%d log patterns checked)' % (
                os.path.basename(args.program[0]), time.time() - started, len(patterns)))
        except Failure as e:
            print('run.py: FAILED: %s' % e, file=sys.stderr)
            if server:
                server.stop()
                print('--- server log ---\n' + server.log_text(), file=sys.stderr)
            return 1
        finally:
            if server:
                server.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
