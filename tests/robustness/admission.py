#!/usr/bin/env python3
"""What a connection may cost the server before and after its hello admits it.

Before the hello names a tenant, a connection may send one small hello and nothing else:
a first frame that claims a large bulk is refused before the server buffers it; idle
connections cost no thread and are dropped at the hello deadline; one address may hold
only so many connections, a tenant only so many sessions. After it, a client that does
not read its replies is held back (the server runs nothing more of its and stops reading
it) while another client is served as usual, and it gets every byte once it reads. Each
refusal is logged and counted in /metrics.

  admission.py --server BIN --opcodes codegen/opcodes.txt
"""
import argparse
import json
import os
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
sys.path.insert(0, os.path.join(HERE, '..', 'tenants'))
import run  # noqa: E402  (the integration harness: Server)
from metrics_status_test import scrape  # noqa: E402
from wire import (HEADER, MAGIC, SUCCESS, VERSION, Client, Failure, expect,  # noqa: E402
                  pack, read_opcodes)

NOT_PERMITTED = 800
PER_ADDRESS = 8
UNSENT = 16 << 20
TENANTS = {'alice': 'alice-token-0123', 'bob': 'bob-token-01234', 'small': 'small-token-012'}


def server_process(server):
    """The server process under the supervisor."""
    pid = server.proc.pid
    with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
        children = [int(c) for c in f.read().split()]
    if len(children) != 1:
        raise Failure('expected one server process, found %s' % children)
    return children[0]


def status_field(pid, field):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise Failure('no %s in /proc/%d/status' % (field, pid))


def raw(server):
    s = socket.socket(socket.AF_UNIX)
    s.connect(server.address[len('unix:'):])
    s.settimeout(5)
    return s


def closed_by_server(s, timeout=5):
    """Whether the server closed s (EOF or reset) within the timeout."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b''
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def refused(url, reason):
    return scrape(url, quiet=True)[('cuda_remote_connections_refused_total',
                                    frozenset([('reason', reason)]))]


def client(server, opcodes, tenant):
    return Client(server.address[len('unix:'):], opcodes, token=TENANTS[tenant])


def check_served(server, opcodes, what):
    c = client(server, opcodes, 'bob')
    t0 = time.monotonic()
    result, dev = c.call('cuMemAlloc_v2', [True, 4096])
    expect(what + ': allocates', result, SUCCESS)
    data = bytes(range(256)) * 16
    expect(what + ': copies in', c.call('cuMemcpyHtoD_v2', [dev, 4096, 0], bulk=data)[0],
           SUCCESS)
    expect(what + ': copies out', c.call('cuMemcpyDtoH_v2', [dev, 4096, 0])[0], SUCCESS)
    expect(what + ': the bytes', c.last_bulk, data)
    elapsed = time.monotonic() - t0
    if elapsed > 2:
        raise Failure('%s: took %.1f s' % (what, elapsed))
    c.sock.close()


def before_hello(server, opcodes, url, pid):
    rss0 = status_field(pid, 'VmRSS')
    s = raw(server)
    body = pack([3])
    # a module load claiming 1 GiB of code, sent as the first frame, with 32 MiB of it
    s.sendall(HEADER.pack(MAGIC, VERSION, opcodes['cuModuleLoadData'], 0, len(body), 1,
                          1 << 30) + body)
    try:
        for _ in range(32):
            s.sendall(b'\x5a' * (1 << 20))
    except (BrokenPipeError, ConnectionResetError):
        pass
    expect('a first frame with a bulk is refused', closed_by_server(s), True)
    grown = status_field(pid, 'VmRSS') - rss0
    if grown > 8 << 10:
        raise Failure('the server grew by %d KiB for a refused frame' % grown)
    print('ok: the server buffered none of it (RSS %+d KiB)' % grown)

    s = raw(server)
    body = pack([0, 0, 0])
    s.sendall(HEADER.pack(MAGIC, VERSION, opcodes['cuCtxSynchronize'], 0, len(body), 1, 0) +
              body)
    expect('a first frame that is not a hello is refused', closed_by_server(s), True)
    s = raw(server)
    hello = pack({'protocol': '1', 'program': 'x' * 31, 'pad': b'\0' * (70 << 10)})
    s.sendall(HEADER.pack(MAGIC, VERSION, opcodes['@hello'], 0, len(hello), 1, 0) + hello)
    expect('a hello of 70 KiB is refused', closed_by_server(s), True)
    server.wait_for('dropped: session \\d+: its first frame was not a hello')
    expect('/metrics counts them', refused(url, 'before_hello'), 3)


def idle_and_addresses(server, opcodes, url, pid):
    threads0 = status_field(pid, 'Threads')
    idle = [raw(server) for _ in range(PER_ADDRESS - 2)]
    time.sleep(0.2)
    expect('idle connections cost no thread', status_field(pid, 'Threads'), threads0)
    worker = client(server, opcodes, 'alice')  # admitted: it stays past the deadline
    idle.append(raw(server))
    extra = raw(server)
    expect('one connection past --max-per-address is closed at once',
           closed_by_server(extra, 2), True)
    server.wait_for('refused: its address has as many connections as it may have')
    expect('/metrics counts it', refused(url, 'per_address'), 1)
    t0 = time.monotonic()
    for s in idle:
        if not closed_by_server(s, 4):
            raise Failure('an idle connection was not dropped at the hello deadline')
    waited = time.monotonic() - t0
    print('ok: idle connections dropped at the deadline (within %.1f s)' % waited)
    server.wait_for('dropped: it sent no hello in time')
    expect('/metrics counts them', refused(url, 'hello_timeout'), PER_ADDRESS - 1)
    expect('the admitted client outlives the deadline',
           worker.call('cuStreamSynchronize', [0])[0], SUCCESS)
    worker.sock.close()
    check_served(server, opcodes, 'a new client after the flood')


def tenant_sessions(server, opcodes, url):
    first = client(server, opcodes, 'small')
    second = client(server, opcodes, 'small')
    third = Client(server.address[len('unix:'):], opcodes, token=TENANTS['small'],
                   expect_refusal=True)
    expect('a session past the tenant\'s "sessions" is refused', third.hello[0], NOT_PERMITTED)
    if b'as many as it may have' not in third.last_body:
        raise Failure('the refusal does not say why: %r' % third.last_body)
    print('ok: with its reason')
    expect('/metrics counts it', refused(url, 'hello_refused'), 1)
    first.sock.close()
    for _ in range(50):  # the session ends on its executor, shortly after the close
        again = Client(server.address[len('unix:'):], opcodes, token=TENANTS['small'],
                       expect_refusal=True)
        if again.hello[0] == SUCCESS:
            break
        time.sleep(0.05)
    expect('once one left, another is admitted', again.hello[0], SUCCESS)
    second.sock.close()
    again.sock.close()


def non_reader(server, opcodes, pid):
    size, copies = 32 << 20, 40
    reader = client(server, opcodes, 'alice')
    result, dev = reader.call('cuMemAlloc_v2', [True, size])
    expect('allocating %d MiB' % (size >> 20), result, SUCCESS)
    reader.send_async('cuMemsetD8_v2', [dev, 0xab, size, 0])
    expect('filling it', reader.call('cuStreamSynchronize', [0])[0], SUCCESS)
    rss0 = status_field(pid, 'VmRSS')
    ids = [reader.send('cuMemcpyDtoH_v2', [dev, size, 0]) for _ in range(copies)]
    time.sleep(2)  # the server runs what it may, then waits for the client to read
    grown = (status_field(pid, 'VmRSS') - rss0) >> 10
    print('server RSS with %d MiB of replies unread: %+d MiB' % (copies * size >> 20, grown))
    if grown > 160:
        raise Failure('unread replies grew the server by %d MiB' % grown)
    print('ok: unread replies are bounded')
    check_served(server, opcodes, 'another client meanwhile')
    want = b'\xab' * size
    for i, call_id in enumerate(ids):
        if reader.reply(call_id)[0] != SUCCESS or reader.last_bulk != want:
            raise Failure('copy %d: wrong reply once read' % i)
    print('ok: every reply arrives, right, once the client reads')
    reader.sock.close()


def test(server, opcodes):
    url = 'http://%s/metrics' % server.wait_for(r'metrics on http://(\S+)/metrics').group(1)
    pid = server_process(server)
    before_hello(server, opcodes, url, pid)
    idle_and_addresses(server, opcodes, url, pid)
    tenant_sessions(server, opcodes, url)
    non_reader(server, opcodes, pid)
    expect('the server process is the same', server_process(server), pid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--opcodes', required=True)
    args = ap.parse_args()
    opcodes = read_opcodes(args.opcodes)

    def extra(workdir):
        path = os.path.join(workdir, 'tenants.json')
        with open(path, 'w') as f:
            json.dump({'tenants': [dict(name=n, token=t, **({'sessions': 2} if n == 'small'
                                                               else {}))
                                   for n, t in TENANTS.items()]}, f)
        return ['--tenants', path, '--metrics', '127.0.0.1:0', '--hello-timeout', '1',
                '--max-per-address', str(PER_ADDRESS), '--max-unsent', str(UNSENT)]

    return run.with_server('admission.py', args.server, lambda s: test(s, opcodes),
                           extra=extra,
                           errors=(Failure, AssertionError, ConnectionError, OSError, KeyError))


if __name__ == '__main__':
    sys.exit(main())
