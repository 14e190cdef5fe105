#!/usr/bin/env python3
"""A lost device context: the server tells every session, starts afresh, and serves again.

On a GPU a kernel fault breaks the one context every session runs in. The emulated device
does the same with --emu-faults context (on a GPU the flag is ignored and the real driver
decides). Tenant alice's kernel stores outside every allocation while tenant bob's program
is working: alice gets the device's error, bob's next call fails with it and bob is told
why, the server keeps running (the same process, a fresh server process under it) and
new clients work, tenants added by a reload included. A server process that crashes, or
is killed outright (the out-of-memory killer's SIGKILL), is started again too.

  context_test.py --server BIN --stub DIR --program FAULT
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
sys.path.insert(0, os.path.join(HERE, '..', 'robustness'))
import run  # noqa: E402
from wire import Failure, expect  # noqa: E402
from metrics_status_test import scrape  # noqa: E402

ILLEGAL = 'cudaErrorIllegalAddress'


def token(name):
    return name + '-token-0123456789'


def write_tenants(path, names):
    with open(path, 'w') as f:
        json.dump({'tenants': [dict(name=n, token=token(n), memory='256MiB')
                               for n in names]}, f)


def client(args, server, name, *argv):
    env = run.client_env(args.stub, server.address, {'CUDA_REMOTE_TOKEN': token(name)})
    return subprocess.Popen([args.program] + [str(a) for a in argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out.split(), err


def restarts(url):
    return scrape(url, quiet=True)[('cuda_remote_server_restarts_total', frozenset())]


def children(pid):
    with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
        return [int(c) for c in f.read().split()]


def check_works(args, server, name, what):
    rc, out, err = finish(client(args, server, name, 'work', 0.3))
    if rc != 0 or out[:1] != ['WORK'] or out[2:4] != ['cudaSuccess', 'cudaSuccess'] \
            or out[1] == '0':
        raise Failure('%s: %s: exit %d, %s\n%s' % (what, name, rc, out, err))
    print('ok: %s (%s: %s kernels, all counted)' % (what, name, out[1]))


def test(server, args, tenants_path):
    url = 'http://%s/metrics' % server.wait_for(r'metrics on http://(\S+)/metrics').group(1)
    expect('no restart yet', restarts(url), 0)
    check_works(args, server, 'bob', 'bob works before')
    # carol arrives by a reload: she must still be a tenant after the restart
    write_tenants(tenants_path, ['alice', 'bob', 'carol'])
    server.proc.send_signal(signal.SIGHUP)
    server.wait_for('tenants reloaded')

    bob = client(args, server, 'bob', 'work', 30)
    time.sleep(1.0)
    rc, out, err = finish(client(args, server, 'alice', 'fault'))
    expect('alice gets the device\'s error, then every call fails with it', out,
           ['FAULT', ILLEGAL, ILLEGAL])
    rc, out, err = finish(bob)
    print('bob, working beside the fault: %s' % ' '.join(out))
    if rc == 0 or out[:1] != ['WORK'] or out[2] != ILLEGAL:
        raise Failure('bob\'s state was lost, but his next call did not say so: exit %d, '
                      '%s\n%s' % (rc, out, err))
    print('ok: bob\'s next call fails with the device\'s error')
    if 'was lost' not in err or 'run the program again' not in err:
        raise Failure('bob was not told why: %r' % err)
    print('ok: bob is told why (%s)' % err.strip().splitlines()[0][:80])
    server.wait_for('serving again', 15)
    if server.proc.poll() is not None:
        raise Failure('the server exited')
    expect('one restart', restarts(url), 1)
    check_works(args, server, 'bob', 'a new client works after the restart')
    check_works(args, server, 'carol', 'a tenant added by a reload is still there')
    figures = scrape(url, quiet=True)
    for name in ('alice', 'bob'):
        tenant = frozenset([('tenant', name)])
        expect('%s holds no memory of the old context' % name,
               figures[('cuda_remote_tenant_memory_used_bytes', tenant)], 0)
        expect('%s keeps the quota' % name,
               figures[('cuda_remote_tenant_memory_quota_bytes', tenant)], 256 << 20)

    # a server process that crashes is started again, under the same first process
    crashed = children(server.proc.pid)
    if len(crashed) != 1:
        raise Failure('expected one server process, found %s' % crashed)
    # (an abort: sanitizers turn a SIGSEGV into a report and an exit status)
    os.kill(crashed[0], signal.SIGABRT)
    server.wait_for(r'server process died of signal 6', 15)
    server.wait_for('server process 2 with a new device context', 15)
    check_works(args, server, 'alice', 'a new client works after a crash')
    expect('two restarts', restarts(url), 2)

    # so is one killed outright, as the kernel's out-of-memory killer does
    killed = children(server.proc.pid)
    if len(killed) != 1:
        raise Failure('expected one server process, found %s' % killed)
    os.kill(killed[0], signal.SIGKILL)
    server.wait_for(r'server process died of signal 9 \(Killed\), perhaps from the '
                    r'kernel\'s out-of-memory killer', 15)
    server.wait_for('server process 3 with a new device context', 15)
    check_works(args, server, 'bob', 'a new client works after a SIGKILL')
    expect('three restarts', restarts(url), 3)
    if server.proc.poll() is not None:
        raise Failure('the supervisor exited')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True)
    ap.add_argument('--program', required=True)
    args = ap.parse_args()
    paths = {}

    def extra(workdir):
        paths['tenants'] = os.path.join(workdir, 'tenants.json')
        write_tenants(paths['tenants'], ['alice', 'bob'])
        return ['--emu-faults', 'context', '--tenants', paths['tenants'],
                '--metrics', '127.0.0.1:0']

    return run.with_server('context_test.py', args.server,
                           lambda s: test(s, args, paths['tenants']), extra=extra,
                           errors=(Failure, subprocess.TimeoutExpired, OSError, KeyError))


if __name__ == '__main__':
    sys.exit(main())
