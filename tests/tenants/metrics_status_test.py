#!/usr/bin/env python3
"""Metrics and status: /metrics and `cuda-remote status` against what tenants really did.

A server runs with three tenants (alice, bob, and ops, an admin) and --metrics. Hand-spoken
clients (wire.py) do an exact amount of work: allocations, copies each way, launches,
failing calls. The test then scrapes /metrics and checks every per-tenant value, and runs
`cuda-remote status` as each tenant: a tenant sees itself and its own sessions, the admin
sees everyone, a wrong token is refused. The endpoint refuses what is not a GET of
/metrics.

  metrics_status_test.py --server BIN --tool BIN --opcodes codegen/opcodes.txt
"""
import argparse
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
sys.path.insert(0, os.path.join(HERE, '..', 'robustness'))
import run  # noqa: E402
from wire import SUCCESS, INVALID_VALUE, Client, Failure, expect, read_opcodes  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
TOKENS = {'alice': 'alice-token-0001', 'bob': 'bob-token-0002', 'ops': 'ops-token-00003'}
PTX = b'''.version 8.0
.target sm_75
.address_size 64
.visible .entry touch(.param .u64 p)
{
    ret;
}
\0'''


def scrape(url, quiet=False):
    """{(metric, frozenset(labels)): value} of a Prometheus text page."""
    with urllib.request.urlopen(url, timeout=10) as r:
        kind = r.headers['Content-Type'].split(';')[0]
        if not quiet:
            expect('/metrics content type', kind, 'text/plain')
        elif kind != 'text/plain':
            raise Failure('/metrics content type is %s' % kind)
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = re.fullmatch(r'([a-z_]+)(?:\{(.*)\})? (\S+)', line)
        if not m:
            raise Failure('not a metric line: %r' % line)
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ''))
        values[(m.group(1), labels)] = float(m.group(3))
    return values


def tenant_value(values, metric, tenant, **labels):
    key = (metric, frozenset([('tenant', tenant)] + list(labels.items())))
    if key not in values:
        raise Failure('no %s for %s in /metrics' % (metric, tenant))
    return values[key]


def do_work(path, ops):
    """alice: 4 MiB, 2 x 64 KiB up, 3 x 4 KiB down, 5 launches, 2 failures.
    bob: 2 MiB, 1 failure. Returns the open clients (their sessions stay)."""
    alice, bob = Client(path, ops, TOKENS['alice']), Client(path, ops, TOKENS['bob'])
    r, a = alice.call('cuMemAlloc_v2', [True, 1 * MiB])
    expect('alice allocates 1 MiB', r, SUCCESS)
    expect('and 3 MiB', alice.call('cuMemAlloc_v2', [True, 3 * MiB])[0], SUCCESS)
    for _ in range(2):
        expect('alice copies 64 KiB up',
               alice.call('cuMemcpyHtoD_v2', [a, 64 * KiB, 0], bulk=b'\1' * (64 * KiB)),
               [SUCCESS])
    for _ in range(3):
        expect('alice copies 4 KiB down', alice.call('cuMemcpyDtoH_v2', [a, 4 * KiB, 0]),
               [SUCCESS])
    r, module = alice.call('cuModuleLoadData', [3], bulk=PTX)
    expect('alice loads code', r, SUCCESS)
    r, function = alice.call('cuModuleGetFunction', [True, module, 'touch'])
    expect('alice finds her kernel', r, SUCCESS)
    for _ in range(5):
        expect('alice launches', alice.call('cuLaunchKernel', [function, [1, 1, 1], [1, 1, 1],
                                                               0, 0, [[0, 8]]],
                                            bulk=struct.pack('<Q', a))[0], SUCCESS)
    for _ in range(2):
        expect('alice frees what is not hers', alice.call('cuMemFree_v2', [12345])[0],
               INVALID_VALUE)
    expect('bob allocates 2 MiB', bob.call('cuMemAlloc_v2', [True, 2 * MiB])[0], SUCCESS)
    expect('bob frees what is not his', bob.call('cuMemFree_v2', [a])[0], INVALID_VALUE)
    return alice, bob


def check_metrics(url):
    v = scrape(url)
    device_total = v[('cuda_remote_device_memory_total_bytes', frozenset())]
    if any(k[0] == 'cuda_remote_info' and ('backend', 'emu') in k[1] for k in v):
        expect('/metrics: the emulated device\'s memory', device_total, 1 << 30)
    want = {
        'alice': {'memory_used_bytes': 4 * MiB, 'memory_quota_bytes': 64 * MiB,
                  'sessions': 1, 'sessions_total': 1, 'launches_total': 5,
                  'errors_total': 2, 'queued_requests': 0},
        'bob': {'memory_used_bytes': 2 * MiB, 'memory_quota_bytes': 32 * MiB, 'sessions': 1,
                'launches_total': 0, 'errors_total': 1},
        'ops': {'memory_used_bytes': 0, 'memory_quota_bytes': device_total, 'sessions': 0,
                'launches_total': 0, 'errors_total': 0},
    }
    for tenant, figures in want.items():
        for name, value in figures.items():
            expect('/metrics: %s %s' % (tenant, name),
                   tenant_value(v, 'cuda_remote_tenant_' + name, tenant), value)
    expect('/metrics: alice copied up',
           tenant_value(v, 'cuda_remote_tenant_copy_bytes_total', 'alice', direction='h2d'),
           128 * KiB)
    expect('/metrics: alice copied down',
           tenant_value(v, 'cuda_remote_tenant_copy_bytes_total', 'alice', direction='d2h'),
           12 * KiB)
    expect('/metrics: bob\'s weight and priority',
           tenant_value(v, 'cuda_remote_tenant_weight', 'bob', priority='high'), 3)
    if v[('cuda_remote_device_memory_used_bytes', frozenset())] < 6 * MiB:
        raise Failure('the device reports less memory used than the tenants hold')
    deadline = time.time() + 5
    while tenant_value(v, 'cuda_remote_tenant_inflight_launches', 'alice') and \
            time.time() < deadline:  # the scheduler has not seen her kernels end yet
        time.sleep(0.01)
        v = scrape(url, quiet=True)
    expect('/metrics: alice\'s launches finished',
           tenant_value(v, 'cuda_remote_tenant_inflight_launches', 'alice'), 0)
    if not tenant_value(v, 'cuda_remote_tenant_device_seconds_total', 'alice') > 0:
        raise Failure('alice\'s five kernels took no device time')
    for tenant in ('bob', 'ops'):
        expect('/metrics: %s launched nothing, used no device time' % tenant,
               tenant_value(v, 'cuda_remote_tenant_device_seconds_total', tenant), 0)


def check_http_errors(url, port):
    for path, code in (('/nope', 404), ('/metrics', 405)):
        try:
            urllib.request.urlopen(urllib.request.Request(
                url.replace('/metrics', path), data=b'x' if code == 405 else None), timeout=10)
            raise Failure('%s answered 200' % path)
        except urllib.error.HTTPError as e:
            expect('%s %s' % ('POST' if code == 405 else 'GET', path), e.code, code)
    with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
        s.sendall(b'NOT HTTP AT ALL\r\n\r\n')
        expect('garbage gets 400', s.recv(64).split(b'\r\n')[0], b'HTTP/1.1 400 Bad Request')
    # a request that never ends: answered with 400 and closed (the close may come first,
    # as a reset, while bytes are still on the way)
    cut = None
    with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
        try:
            s.sendall(b'GET /metrics HTTP/1.1\r\nX: ')
            for _ in range(64):
                s.sendall(b'a' * 1024)
            cut = s.recv(64).split(b'\r\n')[0] or 'closed'
        except (ConnectionResetError, BrokenPipeError):
            cut = 'reset'
    if cut not in (b'HTTP/1.1 400 Bad Request', 'closed', 'reset'):
        raise Failure('an endless request was not cut off: %r' % cut)
    print('ok: an endless request is cut off (%s)' % cut)
    scrape(url)  # and the endpoint still works


def status(tool, address, token, json_out=True):
    env = dict(os.environ)
    env.pop('CUDA_REMOTE_TOKEN', None)
    if token:
        env['CUDA_REMOTE_TOKEN'] = token
    argv = [tool, 'status', '--server', address] + (['--json'] if json_out else [])
    return subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=30)


def check_status(tool, address):
    p = status(tool, address, TOKENS['alice'])
    expect('status as alice', p.returncode, 0)
    st = json.loads(p.stdout)
    expect('alice sees her tenant only', [t['name'] for t in st['tenants']], ['alice'])
    expect('alice sees her sessions only (hers and the command\'s own)',
           sorted(s['tenant'] for s in st['sessions']), ['alice', 'alice'])
    mine = [s for s in st['sessions'] if s['id'] != st['self']]
    expect('one session besides the command', len(mine), 1)
    s = mine[0]
    expect('her session as status shows it',
           (s['memory'], s['launches'], s['bytes_h2d'], s['bytes_d2h'], s['errors']),
           (4 * MiB, 5, 128 * KiB, 12 * KiB, 2))
    if 'wire.py' not in s['who'] or not s['peer']:
        raise Failure('the session does not say who and from where: %r' % s)
    t = st['tenants'][0]
    expect('her tenant as status shows it', (t['quota'], t['used'], t['priority'], t['admin']),
           (64 * MiB, 4 * MiB, 'normal', 0))
    backend = 'cuda' if '--backend cuda' in os.environ.get('CR_SERVER_ARGS', '') else 'emu'
    expect('the server', (st['server']['backend'], st['server']['tenants_file'],
                          st['server']['restarts']), (backend, 1, 0))

    p = status(tool, address, TOKENS['bob'], json_out=False)
    expect('status as bob (tables)', p.returncode, 0)
    if 'bob' not in p.stdout or 'alice' in p.stdout or 'TENANT' not in p.stdout:
        raise Failure('bob\'s table shows other tenants, or no table:\n' + p.stdout)
    print(p.stdout)

    # The earlier status commands' sessions end as their processes exit; until the server
    # has released them they are listed as ending. Within a few seconds only the live ones
    # remain.
    deadline = time.monotonic() + 5
    while True:
        p = status(tool, address, TOKENS['ops'])
        expect('status as ops (admin)', p.returncode, 0)
        st = json.loads(p.stdout)
        expect('the admin sees every tenant', [t['name'] for t in st['tenants']],
               ['alice', 'bob', 'ops'])
        mine = [s for s in st['sessions'] if s['id'] == st['self']]
        expect('the command\'s own session is not ending', [s['ending'] for s in mine], [0])
        live = sorted(s['tenant'] for s in st['sessions'] if not s['ending'])
        listed = sorted(s['tenant'] for s in st['sessions'])
        if listed == ['alice', 'bob', 'ops'] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    expect('and every session', listed, ['alice', 'bob', 'ops'])
    expect('none of them ending', live, listed)

    p = status(tool, address, 'not-a-token-at-all')
    expect('a wrong token is refused', p.returncode, 1)
    if 'rejected' not in p.stderr:
        raise Failure('the refusal does not say why:\n' + p.stderr)
    p = status(tool, 'unix:/nonexistent/socket', TOKENS['alice'])
    expect('no server: exit 1', p.returncode, 1)
    if 'cannot reach' not in p.stderr:
        raise Failure('no reason given:\n' + p.stderr)


def write_tenants(workdir):
    tenants_file = os.path.join(workdir, 'tenants.json')
    with open(tenants_file, 'w') as f:
        json.dump({'tenants': [
            dict(name='alice', token=TOKENS['alice'], memory='64MiB'),
            dict(name='bob', token=TOKENS['bob'], memory='32MiB', weight=3, priority='high'),
            dict(name='ops', token=TOKENS['ops'], admin=True)]}, f)
    return ['--tenants', tenants_file, '--metrics', '127.0.0.1:0']


def test(server, args):
    ops = read_opcodes(args.opcodes)
    path = server.address[len('unix:'):]
    hostport = server.wait_for(r'metrics on http://(\S+)/metrics').group(1)
    url = 'http://%s/metrics' % hostport
    alice, bob = do_work(path, ops)
    check_metrics(url)
    check_http_errors(url, int(hostport.rsplit(':', 1)[1]))
    check_status(args.tool, server.address)
    alice.sock.close()
    bob.sock.close()
    deadline = time.time() + 10
    while True:  # the sessions end, their memory goes back
        v = scrape(url)
        left = (tenant_value(v, 'cuda_remote_tenant_sessions', 'alice'),
                tenant_value(v, 'cuda_remote_tenant_memory_used_bytes', 'alice'))
        if left == (0, 0) or time.time() > deadline:
            break
        time.sleep(0.1)
    expect('alice\'s sessions gone, her memory back', left, (0, 0))
    expect('the counters stay', tenant_value(v, 'cuda_remote_tenant_launches_total', 'alice'),
           5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--tool', required=True)
    ap.add_argument('--opcodes', required=True)
    args = ap.parse_args()
    return run.with_server('metrics_status_test.py', args.server, lambda s: test(s, args),
                           extra=write_tenants,
                           errors=(Failure, AssertionError, ConnectionError, OSError,
                                   subprocess.TimeoutExpired, ValueError, KeyError))


if __name__ == '__main__':
    sys.exit(main())
