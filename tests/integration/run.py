#!/usr/bin/env python3
"""Runs a CUDA program through the stub against a cuda-remoted the test starts.

Each test gets its own server (emulated device, launch trace in a temporary folder) on a
TCP port the kernel picks, or on a Unix socket. The program must exit 0; lines it prints
as `CR_EXPECT_LAUNCH {json}` are launches that must appear in the server's launch trace,
in that order, with exactly those fields (`kernel` matches a substring of the mangled
name; `params` is the hex of the parameter buffer). Lines `CR_EXPECT_WAITS CALL MAX` bound
how often CALL waited for the server, as the stub reports at exit under CUDA_REMOTE_LOG=debug
(the program sets that before its first CUDA call). Scenarios cover what a program alone
cannot check: an unreachable server, a client killed mid-run, a malformed frame.

  run.py --server BIN --stub DIR [--transport tcp|unix] [--scenario NAME]
         [--server-arg ARG]... [--env NAME=VALUE]... PROGRAM [ARGS...]
"""
import argparse
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time


TENANT_TOKEN = 'run-py-tenant-token'  # --tenant-memory's tenant


class Failure(Exception):
    pass


class Server:
    def __init__(self, binary, workdir, transport, backend='emu', driver=None, extra=()):
        extra = list(extra) + list(os.environ.get('CR_SERVER_ARGS', '').split())
        self.log_path = os.path.join(workdir, 'server.log')
        self.trace_path = os.path.join(workdir, 'trace.jsonl')
        listen = ('unix:' + os.path.join(workdir, 'server.sock')) if transport == 'unix' \
            else '127.0.0.1:0'
        cmd = [binary, '--backend', backend, '--listen', listen, '--emu-memory', '1GiB',
               '--emu-trace', self.trace_path] + list(extra)
        if driver:
            cmd += ['--driver', driver]
        # the emulated device inside a driver library reads its trace path from here
        env = dict(os.environ, CUDA_REMOTE_EMU_TRACE=self.trace_path)
        self.log = open(self.log_path, 'w')
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.address = self._wait_for('listening on (\\S+)', 15).group(1)
        if transport == 'unix':
            self.address = listen

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def _wait_for(self, pattern, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            m = re.search(pattern, self.log_text())
            if m:
                return m
            if self.proc.poll() is not None:
                raise Failure('server exited with %s:\n%s' % (self.proc.returncode,
                                                               self.log_text()))
            time.sleep(0.02)
        raise Failure('server log never matched %r:\n%s' % (pattern, self.log_text()))

    def wait_for(self, pattern, seconds=10):
        return self._wait_for(pattern, seconds)

    def stop(self):
        alive = self.proc.poll() is None
        if alive:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return alive

    def trace(self):
        if not os.path.exists(self.trace_path):
            return []
        with open(self.trace_path) as f:
            return [json.loads(line) for line in f if line.strip()]


SANITIZER_REPORTS = ('AddressSanitizer', 'runtime error:', 'ThreadSanitizer')


def with_server(name, binary, test, extra=(), errors=()):
    """Runs test(server) against a fresh server on a Unix socket and returns the exit
    status. extra: server arguments, or a function of the temporary folder that returns
    them (and may write files there). A Failure or any of `errors` fails the test with the
    server's log; so do a server that died and a sanitizer report in its log."""
    with tempfile.TemporaryDirectory(prefix='cr-test-') as workdir:
        server = None
        try:
            server = Server(binary, workdir, 'unix',
                            extra=extra(workdir) if callable(extra) else extra)
            test(server)
            if server.proc.poll() is not None:
                raise Failure('the server died')
        except (Failure,) + tuple(errors) as e:
            print('%s: FAILED: %r' % (name, e), file=sys.stderr)
            if server:
                server.stop()
                print('--- server log ---\n' + server.log_text(), file=sys.stderr)
            return 1
        finally:  # whatever happened (an error in the test itself too), no server stays
            if server:
                server.stop()
        # sanitizers report leaks at exit
        for bad in SANITIZER_REPORTS:
            if bad in server.log_text():
                print('%s: the server reported %s:\n%s' % (name, bad, server.log_text()),
                      file=sys.stderr)
                return 1
    return 0


def sanitizer_runtime(stub):
    """The sanitizer runtime a sanitized stub needs preloaded into programs built without
    one, or None."""
    try:
        out = subprocess.check_output(['ldd', os.path.join(stub, 'libcuda.so.1')], text=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        if 'libasan' in line or 'libtsan' in line:
            parts = line.split('=>')
            if len(parts) == 2:
                return parts[1].split()[0]
    return None


def client_env(stub, address, extra=None):
    env = dict(os.environ)
    runtime = sanitizer_runtime(stub)
    if runtime:
        env['LD_PRELOAD'] = runtime
        env.setdefault('ASAN_OPTIONS', 'detect_leaks=0')  # cudart keeps memory until exit
    env['LD_LIBRARY_PATH'] = stub + (':' + env['LD_LIBRARY_PATH']
                                     if env.get('LD_LIBRARY_PATH') else '')
    env['CUDA_REMOTE_ADDR'] = address
    env.update(extra or {})
    return env


def run_program(argv, env, timeout):
    try:
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, text=True)
    except subprocess.TimeoutExpired as e:
        raise Failure('%s timed out after %ss\nstdout:\n%s\nstderr:\n%s' % (
            argv[0], timeout, e.stdout or '', e.stderr or ''))
    return p


def check_launches(stdout, trace):
    expected = []
    for line in stdout.splitlines():
        if line.startswith('CR_EXPECT_LAUNCH '):
            expected.append(json.loads(line[len('CR_EXPECT_LAUNCH '):]))
    pos = 0
    for exp in expected:
        while pos < len(trace) and exp['kernel'] not in trace[pos]['kernel']:
            pos += 1
        if pos == len(trace):
            raise Failure('launch of %s not in the trace:\n%s' % (
                exp['kernel'], '\n'.join(json.dumps(t) for t in trace)))
        got = trace[pos]
        for key, value in exp.items():
            if key == 'kernel':
                continue
            if got.get(key) != value:
                raise Failure('launch of %s: %s is %r, expected %r\ntrace record: %s' % (
                    exp['kernel'], key, got.get(key), value, json.dumps(got)))
        pos += 1
    return len(expected)


def check_waits(stdout, stderr):
    """The program's CR_EXPECT_WAITS bounds against the stub's report of waited calls."""
    bounds = re.findall(r'^CR_EXPECT_WAITS (\S+) (\d+)$', stdout, re.M)
    if not bounds:
        return 0
    report = re.search(r'calls that waited for the server, most frequent first:(.*)$', stderr,
                       re.M)
    if not report:
        raise Failure('CR_EXPECT_WAITS, yet the stub reported no waited calls '
                      '(CUDA_REMOTE_LOG=debug not set before the first CUDA call?)')
    counts = {name: int(n) for name, n in re.findall(r'(\S+) (\d+)', report.group(1))}
    # the report names the 12 most frequent: a call not named waited at most as often as
    # the least of them, and never when fewer are named
    unnamed = min(counts.values()) if len(counts) >= 12 else 0
    for name, most in bounds:
        n = counts.get(name, unnamed)
        if n > int(most):
            raise Failure('%s waited for the server %s%d times, at most %s expected\n%s' % (
                name, '' if name in counts else 'up to ', n, most, report.group(0)))
    return len(bounds)


def program_env(args):
    """The --env settings for the program under test."""
    extra = {}
    for item in getattr(args, 'env', None) or []:
        name, _, value = item.partition('=')
        extra[name] = value
    return extra


def scenario_plain(args, server):
    p = run_program(args.program, client_env(args.stub, server.address, program_env(args)),
                    args.timeout)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        raise Failure('%s exited with %d' % (args.program[0], p.returncode))
    for pattern in getattr(args, 'expect_stdout', None) or []:
        if not re.search(pattern, p.stdout, re.M):
            raise Failure('stdout of %s does not match %r' % (args.program[0], pattern))
    then = getattr(args, 'then', None)
    if then:  # the same server serves the next client
        q = run_program(then.split(), client_env(args.stub, server.address), args.timeout)
        sys.stdout.write(q.stdout)
        sys.stderr.write(q.stderr)
        if q.returncode != 0:
            raise Failure('the next client, %s, exited with %d' % (then, q.returncode))
    waits = check_waits(p.stdout, p.stderr)
    if not os.path.exists(server.trace_path) and args.backend != 'emu':
        print('run.py: %s passed (no launch trace on a real driver: the program checked '
              'its kernels\' results)' % os.path.basename(args.program[0]))
        return
    n = check_launches(p.stdout, server.trace())
    print('run.py: %s passed (%d launches checked against the trace%s)' % (
        os.path.basename(args.program[0]), n,
        ', %d bounds on waited calls' % waits if waits else ''))


def scenario_unreachable(args, workdir):
    """No server at the address: the program sees cudaErrorNoDevice (it checks), and the
    stub says once which address it could not reach."""
    port = free_port()
    address = '127.0.0.1:%d' % port
    p = run_program(args.program, client_env(args.stub, address), args.timeout)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        raise Failure('%s exited with %d' % (args.program[0], p.returncode))
    mentions = [l for l in p.stderr.splitlines() if address in l]
    if len(mentions) != 1 or 'cannot reach cuda-remoted' not in mentions[0]:
        raise Failure('expected one message naming %s on stderr, got:\n%s' % (address,
                                                                            p.stderr))


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def device_free_bytes(args, server):
    """Free device memory as a fresh client sees it (the program prints FREE <bytes>)."""
    p = run_program(args.program + ['free'], client_env(args.stub, server.address),
                    args.timeout)
    m = re.search(r'^FREE (\d+)$', p.stdout, re.M)
    if p.returncode != 0 or not m:
        raise Failure('memory query failed (%d):\n%s%s' % (p.returncode, p.stdout, p.stderr))
    return int(m.group(1))


def hold_and_kill(args, server, expected_after):
    """A client holds device memory and is killed with SIGKILL; returns what it held and
    the free memory after (waiting a moment for it to reach expected_after)."""
    before = device_free_bytes(args, server)
    env = client_env(args.stub, server.address)
    hog = subprocess.Popen(args.program + ['hold'], env=env, stdout=subprocess.PIPE, text=True)
    line = hog.stdout.readline()
    if not line.startswith('HOLDING'):
        hog.kill()
        raise Failure('the holding client did not start: %r' % line)
    during = device_free_bytes(args, server)
    held = int(line.split()[1])
    if before - during < held:
        hog.kill()
        raise Failure('free memory %d while %d bytes are held (before: %d)' % (during, held,
                                                                              before))
    hog.send_signal(signal.SIGKILL)
    hog.wait()
    server.wait_for(r'session \d+: resources of %s \(pid %d\)' % (
        re.escape(os.path.basename(args.program[0])), hog.pid))
    # a device may finish returning freed memory after the call that freed it returned
    # (the emulated device releases it once earlier work has run): allow it a moment
    deadline = time.time() + 10
    after = device_free_bytes(args, server)
    while after != expected_after and time.time() < deadline:
        time.sleep(0.1)
        after = device_free_bytes(args, server)
    return held, after


def scenario_sigkill(args, server):
    """Clients killed with SIGKILL while holding device memory leave none behind. A GPU's
    driver keeps a little for the process at the first use of some features (2 MiB on an
    H100 after the first such client, likely the default memory pool's), so a second client
    must leave exactly what the first one left."""
    before = device_free_bytes(args, server)
    held, after = hold_and_kill(args, server, before)
    kept = before - after
    if kept < 0 or kept > (0 if args.backend == 'emu' else 8 << 20):
        raise Failure('free device memory %d after the kill, %d before' % (after, before))
    held, again = hold_and_kill(args, server, after)
    if again != after:
        raise Failure('free device memory %d after a second kill, %d after the first' %
                      (again, after))
    print('run.py: %d bytes held by each of two killed clients were returned (the device '
          'kept %d at first use)' % (held, kept))


def scenario_malformed(args, server):
    """Garbage on one connection closes that connection only."""
    conns = []
    for payload in (b'\x00' * 32,                          # bad magic
                    struct.pack('<IHHIIQQ', 0x544D5243, 1, 1, 0, 1 << 30, 1, 0),  # huge body
                    b'GET / HTTP/1.0\r\n\r\n' + b'x' * 16):
        if ':' in server.address and not server.address.startswith('unix:'):
            host, port = server.address.rsplit(':', 1)
            c = socket.create_connection((host, int(port)), timeout=5)
        else:
            c = socket.socket(socket.AF_UNIX)
            c.connect(server.address[5:])
            c.settimeout(5)
        c.sendall(payload)
        conns.append(c)
    for c in conns:
        try:
            data = c.recv(1)
        except ConnectionResetError:
            data = b''
        if data != b'':
            raise Failure('the server answered a malformed frame instead of closing')
        c.close()
    if server.log_text().count('malformed frame') < 3:
        raise Failure('server did not report the malformed frames:\n' + server.log_text())
    scenario_plain(args, server)  # and it still serves a real client


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True, help='folder holding libcuda.so.1')
    ap.add_argument('--transport', choices=('tcp', 'unix'), default='tcp')
    ap.add_argument('--scenario', default='plain',
                    choices=('plain', 'unreachable', 'sigkill', 'malformed'))
    ap.add_argument('--timeout', type=float, default=60)
    ap.add_argument('--backend', default='emu')
    ap.add_argument('--driver', help='driver library for --backend cuda')
    ap.add_argument('--expect-log', help='a regular expression the server log must match')
    ap.add_argument('--reject-log', help='a regular expression the server log must not match')
    ap.add_argument('--server-arg', action='append', default=[],
                    help='an extra argument for cuda-remoted; repeatable')
    ap.add_argument('--tenant-memory', metavar='SIZE',
                    help='run the program as a tenant with this memory quota (e.g. 2GiB), so '
                         'that what it reads of memory in use is its own, not the whole '
                         'GPU\'s, which other processes move')
    ap.add_argument('--env', action='append', default=[],
                    help='NAME=VALUE in the program\'s environment; repeatable')
    ap.add_argument('--expect-stdout', action='append',
                    help='a regular expression (multi-line) the program\'s stdout must match; '
                         'repeatable')
    ap.add_argument('--then', help='another program (with its arguments, space-separated) to '
                                   'run against the same server afterwards')
    ap.add_argument('program', nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if not args.program:
        ap.error('no program')
    with tempfile.TemporaryDirectory(prefix='cr-test-') as workdir:
        if args.scenario == 'unreachable':
            try:
                scenario_unreachable(args, workdir)
            except Failure as e:
                print('run.py: FAILED: %s' % e, file=sys.stderr)
                return 1
            return 0
        server = None
        if args.tenant_memory:
            tenants = os.path.join(workdir, 'tenants.json')
            with open(tenants, 'w') as f:
                json.dump({'tenants': [{'name': 'test', 'token': TENANT_TOKEN,
                                        'memory': args.tenant_memory}]}, f)
            args.server_arg += ['--tenants', tenants]
            args.env.append('CUDA_REMOTE_TOKEN=' + TENANT_TOKEN)
        try:
            server = Server(args.server, workdir, args.transport, args.backend, args.driver,
                            args.server_arg)
            {'plain': scenario_plain, 'sigkill': scenario_sigkill,
             'malformed': scenario_malformed}[args.scenario](args, server)
            if server.proc.poll() is not None:
                raise Failure('the server died:\n' + server.log_text())
            if args.expect_log and not re.search(args.expect_log, server.log_text()):
                raise Failure('the server log does not match %r:\n%s' % (args.expect_log,
                                                                         server.log_text()))
            if args.reject_log and re.search(args.reject_log, server.log_text()):
                raise Failure('the server log matches %r:\n%s' % (args.reject_log,
                                                                  server.log_text()))
            for bad in SANITIZER_REPORTS:
                if bad in server.log_text():
                    raise Failure('server reported %s:\n%s' % (bad, server.log_text()))
        except Failure as e:
            print('run.py: FAILED: %s' % e, file=sys.stderr)
            if server:
                server.stop()
                print('--- server log ---\n' + server.log_text(), file=sys.stderr)
            return 1
        server.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
