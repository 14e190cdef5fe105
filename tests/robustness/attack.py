#!/usr/bin/env python3
"""Attack and load run against cuda-remoted: a hostile tenant's view of the server.

Starts its own cuda-remoted on the emulated device (--backend emu) with four tenants
(tokens, quotas), a Unix socket, a TCP port on 127.0.0.1 the kernel picks and a metrics
endpoint on 127.0.0.1, then runs eleven classes of attack and load (thirteen with --tls),
one after the other, while a "canary" client of another tenant keeps making checked calls
(allocate, copy a known pattern up, copy it back, compare, memset, compare, free). It prints
one table row per class and exits 1 if any verdict is FAIL (2 for a usage error or its own
time limit).

It is run by hand; it is not part of the default test run (it takes minutes, and needs a
few GiB of RAM where a server does not bound what a hostile client makes it hold; a server
not hardened against a class FAILs it, which is the point):

    python3 tests/robustness/attack.py --quick    # about 1-2 minutes
    python3 tests/robustness/attack.py            # the full run, at most about 10 minutes
    python3 tests/robustness/attack.py --quick --only 5,6 --keep-log /tmp/attack-logs
    python3 tests/robustness/attack.py --quick --tls          # every class over TLS 1.3
    python3 tests/robustness/attack.py --tls --only 12        # the full TLS load, ~2 min

  --server BIN   cuda-remoted (default: build/server/cuda-remoted of this checkout)
  --seed N       seed of every random choice (default 1)
  --only LIST    run only these classes (comma-separated numbers)
  --keep-log DIR copy the server's log (--log debug) there; without it the log is kept
                 in its temporary folder only when some verdict is FAIL, and its path printed
  --tls          the script makes a CA and a server certificate (CN localhost, SANs localhost
                 and 127.0.0.1) with the openssl command in its temporary folder and starts
                 its server with --tls-cert/--tls-key: every TCP connection the script makes
                 (hand-spoken clients, raw bytes, class 10's child processes) goes through
                 Python's ssl, TLS 1.3, trusting that CA only; Unix-socket ones stay
                 plaintext. Raw bytes go inside TLS, so that they still reach the frame
                 parser, except where a class is about the connection itself: class 1 sends
                 a quarter of its garbage on TCP in plaintext (for the handshake's parser),
                 class 6's TCP flood is bare TCP that never begins TLS, class 13 is about
                 handshakes. Classes 12 and 13 run only with --tls.
  --load-calls N class 12's calls per client (default 10,000; 1,000 with --quick)

The classes, and what each verdict requires (every class also requires: no server process
died unless the script killed it, the canary got no wrong reply and no failed call, and no
sanitizer report appeared in the server log):
  1 random frames         random bytes, random valid headers with random bodies, and random
                          msgpack calls after a valid hello: no malformed reply, no
                          connection left open 3 s after the client's EOF
  2 mutated bodies        valid frames of common calls (alloc, copies, memsets, stream
                          create, launches, ...) with flipped/inserted/deleted bytes, or
                          with values changed inside valid msgpack: no malformed reply, and
                          a fresh allocation in a surviving session still copies correctly
  3 absurd lengths        body/bulk lengths over the limits (4 GiB, 2^63, ...) are closed
                          within 2 s; absurd sizes inside bodies (2^64-1-byte copies, memsets
                          whose size wraps, huge 3D copies, launch configurations, images
                          claiming 2^64 bytes) are refused, never answered success; RSS grows
                          < 64 MiB
  4 truncated / drip      truncated conversations are closed within 3 s of the client's EOF;
                          connections dripping a byte per 100 ms: a real client is served
                          within 2 s meanwhile, RSS grows < 64 MiB
  5 pre-auth bulk         a first frame claiming a 2 GiB module, streamed before any hello:
                          server RSS grows < 64 MiB
  6 idle flood            N connections that never say hello, half over TCP from 127.0.0.2
                          (another host, as the server sees it), half over the Unix socket:
                          a real client over TCP from 127.0.0.1 and one over the Unix socket
                          are each served within 2 s, and the server's threads grow by < 32
                          (a client from the flood's own TCP address is tried too; not a
                          verdict)
  7 non-reading client    40 x 64 MiB device-to-host copies pipelined, replies never read:
                          RSS grows < 512 MiB and another client is served within 2 s
  8 over-read launch      a kernel with a 32752-byte by-value parameter launched with an
                          8-byte parameter buffer (layout [[0,8],[8,0]], and a short
                          [[0,8],[8,16]]): refused with CUDA_ERROR_INVALID_VALUE (1)
  9 many clients          64 clients of 4 tenants doing checked synchronous calls: no wrong
                          reply, no failure
 10 SIGKILLed clients     child processes killed mid-copy: the tenant's memory and session
                          count (/metrics) return to what they were within 10 s, each time
 11 server SIGKILLed      the server process (the supervisor's child) killed with SIGKILL: a
                          new client is served within 10 s
 12 TLS load              (--tls) 64 clients of 4 tenants over TLS, each N checked
                          synchronous calls (round trips of 1 B to 64 KiB, 1 MiB in 1% of
                          them): no wrong or lost reply (none later than 30 s), no failed
                          client, all calls done within 540 s (120 s quick); the server's RSS
                          grows < 64 MiB from the end of the warm-up (the first 10% of the
                          calls) to the end of the load. Prints calls/s and the RSS series
 13 TLS never finished    (--tls) against a server of its own with --hello-timeout 4
                          --max-per-address 64 --max-connections 1280 (448 quick): TCP
                          connections whose TLS handshake never finishes (nothing sent, part
                          of a ClientHello, a ClientHello dripped a byte per 100 ms, a whole
                          ClientHello and never the client's Finished; and, beside them,
                          handshakes finished but no hello): 64 handshaking and 64 idle from
                          one address each, then 16 more each: those refused at once (metric
                          per_address); 1000 (320 quick) of every kind from other addresses,
                          a real TLS client from 127.0.0.1 served within 2 s meanwhile; then,
                          the server filled to --max-connections with handshakes, 16 past it
                          refused at once (too_many_connections), a real client served again
                          within 6.5 s, and again, until a fill grows the RSS peak < 4 MiB
                          over the one before (5 fills at most, 3 quick); every connection
                          the server took dropped within 6.5 s of connecting (metric
                          hello_timeout, the log's "dropped: it sent no hello in time"); RSS
                          grows < 16 MiB + 80 KiB a connection held; threads grow < 32

Network: it connects only to 127.0.0.1 and to the Unix socket of the server it started
(class 6's flood binds its TCP connections to the source address 127.0.0.2, still to
127.0.0.1, and, run as root, opens its Unix-socket connections as uid 65534 in a child
process, another local user as the server sees it; class 13 binds its connections to
127.0.0.2 and up and 127.0.1.x to 127.0.5.x, 48 to 80 an address); every loop is bounded in
count and in time, and a watchdog ends the run (and the server) past its time limit (240 s
quick, 600 s full; with --tls 450 s and 1230 s).
Python 3.11 standard library only.
"""
import argparse
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'integration'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'tls'))
sys.path.insert(0, HERE)
import run  # noqa: E402  (the integration harness: Server)
from tls_test import make_ca, make_cert  # noqa: E402  (test certificates, openssl command)
from wire import (CLIENT_ID_BASE, FRAME_ASYNC, FRAME_REPLY, HEADER, INVALID_VALUE,  # noqa: E402
                  MAGIC, SUCCESS, VERSION, pack, read_opcodes, reply_ints)

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
FRAME_PARTIAL = 4
MAX_BODY = 4 << 20            # CR_FRAME_MAX_BODY
MAX_BULK = 2 << 30            # CR_FRAME_MAX_BULK
OPS = read_opcodes(os.path.join(ROOT, 'codegen', 'opcodes.txt'))
OP_NAMES = {v: k for k, v in OPS.items()}
SERVER_PUSH = {OPS[n] for n in ('@host_func', '@d2h_data', '@context_error', '@device_output')}

TENANTS = {  # name: (token, quota)
    'alpha': ('alpha-token-attack-0001', '768MiB'),
    'beta': ('beta-token-attack-0002', '768MiB'),
    'gamma': ('gamma-token-attack-0003', '768MiB'),
    'delta': ('delta-token-attack-0004', '768MiB'),  # the canary's tenant
}
CANARY_TENANT = 'delta'
EMU_MEMORY = '4GiB'

# --- verdict criteria (see the docstring) ---------------------------------------------------
REAL_CLIENT_MAX_S = 2.0          # classes 4, 6, 7: a real client is served within this
PREAUTH_RSS_MAX = 64 * MiB       # class 5: RSS growth while unauthenticated bytes arrive
DRIP_RSS_MAX = 64 * MiB          # class 3, 4: RSS growth
IDLE_THREADS_MAX = 32            # class 6: thread growth with N idle connections
NONREADER_RSS_MAX = 512 * MiB    # class 7: RSS growth with unread replies
HEADER_CLOSE_S = 2.0             # class 3: an over-limit header closes the connection by then
RELEASE_S = 10.0                 # class 10: a killed client's memory is back by then
RESTART_SERVE_S = 10.0           # class 11: a new client is served by then
LOAD_CLIENTS = 64                # class 12: clients (of the 4 tenants), all over TLS
LOAD_CALLS, LOAD_CALLS_QUICK = 10000, 1000   # class 12: checked synchronous calls, each
LOAD_SECONDS, LOAD_SECONDS_QUICK = 540, 120  # class 12: the calls must be done by then
LOAD_REPLY_S = 30.0              # class 12: a reply not there by then is lost
LOAD_WARMUP = 0.1                # class 12: the warm-up: this share of all the calls
LOAD_RSS_MAX = 64 * MiB          # class 12: RSS growth from after the warm-up to the end
LOAD_SIZES = (1, 7, 4096, 16 * KiB + 1, 64 * KiB + 3)  # class 12: bytes of a round trip
LOAD_BIG, LOAD_BIG_SHARE = 1 * MiB, 0.01                # class 12: and now and then this
HS_HELLO_TIMEOUT = 4             # class 13's server: --hello-timeout (seconds)
HS_PER_ADDRESS = 64              # class 13's server: --max-per-address
HS_MAX_CONN, HS_MAX_CONN_QUICK = 1280, 448   # class 13's server: --max-connections
HS_FLOOD, HS_FLOOD_QUICK = 1000, 320         # class 13: connections in its first phase
HS_EXTRA = 16                    # class 13: attempts past a limit, each refused at once
HS_DROP_SLACK = 1.5              # class 13: dropped within the hello timeout, a quarter of
                                 # it (the period of the server's check) and this
HS_KINDS = ('silent', 'partial', 'drip', 'stalled', 'no-hello')  # class 13 (see Stall)
HS_RSS_BASE = 16 * MiB           # class 13: RSS growth: this (the real clients, the canary)
HS_RSS_PER_CONN = 80 * KiB       # and this a connection the server holds at once
HS_REFILL_RSS_MAX = 4 * MiB      # class 13: a fill of the server grows its RSS peak by less
HS_FILLS, HS_FILLS_QUICK = 5, 3  # than this over the one before, by this many fills at most

PTX_POKE = b'''.version 8.0
.target sm_75
.address_size 64
.visible .entry poke(.param .u64 p, .param .u32 v)
{
    ret;
}
\0'''

LEAK_BLOB = 32752
LEAK_COPY = 256  # bytes copied from each end of the blob


def ptx_leak():
    """leak(out, blob[32752]): copies blob's first and last LEAK_COPY bytes to out."""
    lines = ['.version 8.0', '.target sm_75', '.address_size 64',
             '.visible .entry leak(.param .u64 out, .param .align 1 .b8 blob[%d])' % LEAK_BLOB,
             '{', '    .reg .u16 %rs<2>;', '    .reg .u64 %rd<3>;',
             '    ld.param.u64 %rd1, [out];', '    cvta.to.global.u64 %rd2, %rd1;']
    offsets = list(range(LEAK_COPY)) + list(range(LEAK_BLOB - LEAK_COPY, LEAK_BLOB))
    for i, off in enumerate(offsets):
        lines.append('    ld.param.u8 %%rs1, [blob+%d];' % off)
        lines.append('    st.global.u8 [%%rd2+%d], %%rs1;' % i)
    lines += ['    ret;', '}', '']
    return '\n'.join(lines).encode() + b'\0'


# --- plumbing -------------------------------------------------------------------------------

class WrongReply(Exception):
    """The server answered, but not what a correct server answers."""


class Refused(Exception):
    """The hello was refused."""


LOCAL_HOSTS = ('127.0.0.1', 'localhost', '::1')


def split_local(addr):
    """(family, sockaddr) of a local address; anything else ends the script."""
    if addr.startswith('unix:'):
        return socket.AF_UNIX, addr[5:]
    host, port = addr.rsplit(':', 1)
    host = host.strip('[]')
    if host not in LOCAL_HOSTS:
        raise SystemExit('attack.py: refusing to connect to %s (not this machine)' % addr)
    return (socket.AF_INET6 if ':' in host else socket.AF_INET), (host, int(port))


# --tls: the context every TCP connection of the script goes through (TLS 1.3, trusting the
# run's own CA only); None: plaintext everywhere. Unix-socket connections stay plaintext.
TLS = None


def tls_context(ca):
    c = ssl.create_default_context(cafile=ca)
    c.minimum_version = ssl.TLSVersion.TLSv1_3
    return c


def make_pki(d):
    """The run's CA and the server's certificate (CN localhost, SANs localhost and
    127.0.0.1), made with the openssl command in d; returns (ca, cert, key) paths."""
    os.makedirs(d, exist_ok=True)
    make_ca(d, 'ca')
    make_cert(d, 'server', 'ca', '/CN=localhost', 'DNS:localhost,IP:127.0.0.1')
    return tuple(os.path.join(d, n) for n in ('ca.pem', 'server.pem', 'server.key'))


def connect(addr, timeout=5.0, source=None, plain=False):
    """A connection to a local address; source: the local IP address to connect from (TCP;
    any 127/8 address is this machine's loopback), so that one client can look like
    another host. With --tls a TCP connection has done its TLS handshake when this returns,
    unless plain (then it is bare TCP, for what is about the connection itself)."""
    family, where = split_local(addr)
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        if source and family != socket.AF_UNIX:
            s.bind((source, 0))
        s.connect(where)
        if TLS is not None and family != socket.AF_UNIX and not plain:
            s = TLS.wrap_socket(s, server_hostname=where[0])
    except BaseException:
        s.close()
        raise
    return s


def frame(op, body=b'', bulk=b'', flags=0, call_id=1, body_len=None, bulk_len=None):
    opcode = OPS[op] if isinstance(op, str) else op
    return HEADER.pack(MAGIC, VERSION, opcode, flags,
                       len(body) if body_len is None else body_len, call_id,
                       len(bulk) if bulk_len is None else bulk_len) + body + bulk


def hello_body(token, program='attack.py'):
    return {'protocol': '1', 'cuda_version': 13000, 'client': 'attack.py',
            'pid': str(os.getpid()), 'host': 'attack', 'program': program, 'token': token}


def pattern(size, seed):
    return random.Random(seed).randbytes(size)


class Conn:
    """A hand-spoken client over TCP or a Unix socket (wire.Client speaks Unix only)."""

    def __init__(self, addr, token=None, timeout=10.0, hello=True, program='attack.py',
                 source=None):
        self.sock = connect(addr, timeout, source)
        self.sock.settimeout(timeout)
        self.call_id = 0
        self.last_bulk = b''
        self.context_error = None
        self.stray = 0
        if hello:
            r = self.call('@hello', hello_body(token, program))
            if r[0] != SUCCESS:
                self.close()
                raise Refused('hello refused with %d' % r[0])

    @classmethod
    def wrap(cls, sock, call_id):
        """A Conn over a socket the caller opened and spoke on (call_id: its last call)."""
        c = cls.__new__(cls)
        c.sock, c.call_id, c.last_bulk, c.context_error, c.stray = sock, call_id, b'', None, 0
        return c

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, op, body, bulk=b'', flags=0):
        self.call_id += 1
        data = pack(body)
        self.sock.sendall(HEADER.pack(MAGIC, VERSION, OPS[op], flags, len(data), self.call_id,
                                      len(bulk)) + data)
        if bulk:
            self.sock.sendall(bulk)
        return self.call_id

    def send_raw(self, data):
        self.sock.sendall(data)

    def _read(self, n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:], min(n - got, 4 << 20))
            if not k:
                raise ConnectionError('the server closed the connection')
            got += k
        return bytes(buf)

    def read_frame(self):
        magic, ver, op, flags, body_len, call_id, bulk_len = HEADER.unpack(self._read(32))
        if magic != MAGIC or ver != VERSION or body_len > MAX_BODY or bulk_len > 64 * MiB:
            raise WrongReply('malformed reply header (magic %#x version %d body %d bulk %d)' % (
                magic, ver, body_len, bulk_len))
        if not flags & FRAME_REPLY and op not in SERVER_PUSH:
            raise WrongReply('frame from the server that is neither a reply nor a push '
                             '(opcode %d flags %#x)' % (op, flags))
        return op, flags, call_id, self._read(body_len), self._read(bulk_len)

    def reply(self, call_id):
        """The reply's leading integers; its bulk bytes (all frames) in last_bulk."""
        bulks = []
        while True:
            op, flags, got_id, body, bulk = self.read_frame()
            if not flags & FRAME_REPLY:
                if op == OPS['@context_error']:
                    self.context_error = body
                continue
            if got_id != call_id:
                if got_id > self.call_id:
                    raise WrongReply('reply to call %d, never sent' % got_id)
                self.stray += 1  # a reply to an earlier call we did not wait for
                continue
            bulks.append(bulk)
            if not flags & FRAME_PARTIAL:
                self.last_bulk = b''.join(bulks)
                try:
                    return reply_ints(body)
                except (AssertionError, IndexError):
                    raise WrongReply('reply body is not an array: %r' % body[:16])

    def call(self, op, body, bulk=b''):
        return self.reply(self.send(op, body, bulk))

    def check(self, what, op, body, bulk=b'', want=SUCCESS):
        r = self.call(op, body, bulk)
        if not r or r[0] != want:
            raise WrongReply('%s: result %s, expected %d' % (what, r[:1], want))
        return r


def roundtrip(c, size, seed):
    """Checked calls: alloc, copy up, copy back, compare, memset half, compare, free.
    Returns how many calls it made (6, or 4 for a 1-byte round trip)."""
    dev = c.check('alloc %d' % size, 'cuMemAlloc_v2', [True, size])[1]
    data = pattern(size, seed)
    c.check('copy up', 'cuMemcpyHtoD_v2', [dev, size, 0], data)
    c.check('copy down', 'cuMemcpyDtoH_v2', [dev, size, 0])
    if c.last_bulk != data:
        raise WrongReply('copy of %d bytes came back different (%d bytes back)' % (
            size, len(c.last_bulk)))
    half, v = size // 2, seed & 0xff
    if half:
        c.check('memset', 'cuMemsetD8_v2', [dev, v, half, 0])
        c.check('copy down after memset', 'cuMemcpyDtoH_v2', [dev, size, 0])
        if c.last_bulk != bytes([v]) * half + data[half:]:
            raise WrongReply('memset of %d bytes came back different' % half)
    c.check('free', 'cuMemFree_v2', [dev])
    return 6 if half else 4


def real_client(addr, token, size=64 * KiB, seed=7, timeout=5.0, source=None):
    """Seconds a fresh client takes to connect, say hello and do a checked round trip;
    raises on a failure, WrongReply on a wrong answer."""
    t0 = time.monotonic()
    c = Conn(addr, token, timeout=timeout, program='attack.py real-client', source=source)
    try:
        roundtrip(c, size, seed)
    finally:
        c.close()
    return time.monotonic() - t0


def readable(f, seconds):
    """Whether f (a socket or file) has something to read (or an EOF, or an error) within
    seconds. poll(), not select(): descriptors go past 1024 in the idle flood."""
    p = select.poll()
    p.register(f, select.POLLIN | select.POLLPRI)
    return bool(p.poll(max(0, int(seconds * 1000))))


def wait_closed(s, seconds):
    """'closed' if the peer closed (EOF or reset) within seconds, else 'open'. Data the
    server sent meanwhile is discarded."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return 'open'
        try:
            r = readable(s, left)
        except (OSError, ValueError):
            return 'closed'
        if r:
            try:
                if not s.recv(1 << 16):
                    return 'closed'
            except socket.timeout:  # TLS: part of a record came, the rest did not yet
                continue
            except (ConnectionError, OSError):
                return 'closed'


def proc_stats(pid):
    """(rss bytes, threads, open fds) of a process, or None."""
    if not pid:
        return None
    try:
        with open('/proc/%d/status' % pid) as f:
            text = f.read()
        rss = int(re.search(r'^VmRSS:\s+(\d+) kB', text, re.M).group(1)) * 1024
        threads = int(re.search(r'^Threads:\s+(\d+)', text, re.M).group(1))
        fds = len(os.listdir('/proc/%d/fd' % pid))
        return rss, threads, fds
    except (OSError, AttributeError):
        return None


def children_of(pid):
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    out = []  # no /proc/PID/task/PID/children: scan
    for name in os.listdir('/proc'):
        if name.isdigit():
            try:
                with open('/proc/%s/stat' % name) as f:
                    if int(f.read().rsplit(')', 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return out


# --- the server -----------------------------------------------------------------------------

class Target:
    """A cuda-remoted (supervisor and server process) the script started. tls: (certificate,
    key) for its TCP listener, or None; options: more server options (a class's own
    limits)."""

    def __init__(self, binary, workdir, tls=None, options=()):
        self.workdir = workdir
        self.options = list(options)
        tenants = os.path.join(workdir, 'tenants.json')
        with open(tenants, 'w') as f:
            json.dump({'tenants': [dict(name=n, token=t, memory=q)
                                   for n, (t, q) in TENANTS.items()]}, f)
        extra = ['--listen', '127.0.0.1:0', '--tenants', tenants, '--metrics', '127.0.0.1:0',
                 '--emu-memory', EMU_MEMORY, '--log', 'debug']
        if tls:
            extra += ['--tls-cert', tls[0], '--tls-key', tls[1]]
        extra += self.options
        self.server = run.Server(binary, workdir, 'unix', extra=extra)
        self.unix = self.server.address
        text = self.server.log_text()
        tcp = [a for a in re.findall(r'listening on (\S+)', text)
               if re.fullmatch(r'(127\.0\.0\.1|\[::1\]|localhost):\d+', a)]
        if not tcp:
            raise run.Failure('no TCP listener in the log:\n' + text)
        self.tcp = tcp[0]
        said = re.search(r'listening on %s \((.*)\)' % re.escape(self.tcp), text)
        self.tcp_speaks = said.group(1) if said else '?'
        if bool(tls) != self.tcp_speaks.startswith('TLS'):
            raise run.Failure('the TCP listener speaks %s:\n%s' % (self.tcp_speaks, text))
        self.metrics = self.server.wait_for(r'metrics on http://(\S+)/metrics').group(1)
        split_local(self.tcp), split_local(self.metrics)
        self.pid = self.server.proc.pid
        self.child = None
        deadline = time.time() + 10
        while not self.child and time.time() < deadline:
            kids = children_of(self.pid)
            self.child = kids[0] if kids else None
            time.sleep(0.02)

    def alive(self):
        return self.server.proc.poll() is None

    def addr(self, i):
        return self.unix if i % 2 == 0 else self.tcp

    def log_text(self):
        return self.server.log_text()

    def metrics_values(self):
        with urllib.request.urlopen('http://%s/metrics' % self.metrics, timeout=5) as r:
            text = r.read().decode()
        values = {}
        for line in text.splitlines():
            m = re.fullmatch(r'([a-z_]+)(?:\{(.*)\})? (\S+)', line)
            if m:
                labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or '')))
                values[(m.group(1), labels)] = float(m.group(3))
        return values

    def tenant_metric(self, name, tenant):
        return self.metrics_values().get(('cuda_remote_tenant_' + name, (('tenant', tenant),)))

    def stop(self):
        if self.server.proc.poll() is None:
            self.server.stop()
        else:
            self.server.log.close()
        if self.child:  # a server process left behind by a dead supervisor
            try:
                os.kill(self.child, signal.SIGKILL)
            except OSError:
                pass


class Monitor(threading.Thread):
    """Samples the server process every 50 ms: its pid (a new one is a restart), RSS,
    threads, descriptors; records deaths."""

    def __init__(self):
        super().__init__(daemon=True)
        self.lock = threading.Lock()
        self.target = None
        self.events = []          # (time, kind, detail, expected)
        self.expect_until = 0.0   # deaths before this moment were caused by the script
        self.peak = None
        self.halt = threading.Event()
        self.sampling = threading.Lock()  # the monitor thread and the classes both sample

    def set_target(self, target):
        with self.lock:
            self.target = target

    def reset_peak(self):
        with self.lock:
            self.peak = None

    def sample(self):
        with self.sampling:
            return self._sample()

    def _sample(self):
        with self.lock:
            t = self.target
        if t is None:
            return None
        now = time.time()
        expected = now < self.expect_until
        if not t.alive() and not getattr(t, 'dead_seen', False):
            t.dead_seen = True
            self.events.append((now, 'supervisor-exit', 'supervisor exited with %s' %
                                t.server.proc.returncode, expected))
        kids = children_of(t.pid) if t.alive() else []
        pid = kids[0] if kids else None
        if t.child and not os.path.exists('/proc/%d' % t.child):
            self.events.append((now, 'server-death', 'server process %d ended' % t.child,
                                expected))
            t.child = None
        if pid and pid != t.child:
            if t.child is not None:
                self.events.append((now, 'server-death', 'server process %d replaced' %
                                    t.child, expected))
            self.events.append((now, 'server-start', 'server process %d started' % pid,
                                expected))
            t.child = pid
        st = proc_stats(t.child)
        if st:
            with self.lock:
                self.peak = st if self.peak is None else tuple(map(max, self.peak, st))
        return st

    def run(self):
        while not self.halt.is_set():
            try:
                self.sample()
            except Exception:  # never let sampling die silently mid-run
                traceback.print_exc()
            time.sleep(0.05)


class Canary(threading.Thread):
    """A well-behaved client of its own tenant making checked calls all along."""

    def __init__(self):
        super().__init__(daemon=True)
        self.target = None
        self.cls = None
        self.stats = {}   # class -> [ok, wrong, failed, max latency s, first problem]
        self.halt = threading.Event()
        self.lock = threading.Lock()

    def _count(self, i, value=1, problem=None):
        with self.lock:
            st = self.stats.setdefault(self.cls, [0, 0, 0, 0.0, None])
            if i == 3:
                st[3] = max(st[3], value)
            else:
                st[i] += value
            if problem and st[4] is None:
                st[4] = problem

    def run(self):
        token = TENANTS[CANARY_TENANT][0]
        conn, n, target = None, 0, None
        while not self.halt.is_set():
            n += 1
            t0 = time.monotonic()
            try:
                if conn is None:
                    target = self.target
                    conn = Conn(target.unix if n % 2 else target.tcp, token,
                                timeout=5, program='attack.py canary')
                roundtrip(conn, 64 * KiB, 1000 + n)
                self._count(0)
                self._count(3, time.monotonic() - t0)
            except WrongReply as e:
                self._count(1, problem='wrong: %s' % e)
                conn.close()
                conn = None
            except Exception as e:
                if target is self.target:  # not a server the script stopped for another
                    self._count(2, problem='failed: %s: %s' % (type(e).__name__, e))
                if conn:
                    conn.close()
                conn = None
                self.halt.wait(0.5)
            self.halt.wait(0.05)
        if conn:
            conn.close()


class Result:
    def __init__(self, num, name):
        self.num, self.name = num, name
        self.sent = ''
        self.dropped = 0   # connections the server refused or closed
        self.wrong = 0
        self.crashes = 0
        self.restarts = 0
        self.before = self.after = self.peak = None
        self.canary = [0, 0, 0, 0.0, None]
        self.fail = []
        self.notes = []
        self.seconds = 0.0

    @property
    def verdict(self):
        return 'FAIL' if self.fail else 'ok'


class Ctx:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.target = None
        self.monitor = Monitor()
        self.canary = Canary()
        self.rng = random.Random(args.seed)
        self.children = []  # subprocesses the script started (killed at exit)
        self.pki = None     # --tls: (CA, server certificate, its key)

    def q(self, quick, full):
        return quick if self.quick else full

    def token(self, tenant):
        return TENANTS[tenant][0]


# --- 1. random frames -----------------------------------------------------------------------

INTERESTING = [0, 1, 2, 7, 8, 255, 256, 4096, 65535, 65536, (1 << 31) - 1, 1 << 31,
               (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, -1, -(1 << 31),
               -(1 << 63), CLIENT_ID_BASE, CLIENT_ID_BASE + 0x10, 0x10000, 0x10010, 0x10020]


def rand_value(rng, handles, depth=0):
    k = rng.randrange(12)
    if k < 4:
        return rng.choice(INTERESTING + handles)
    if k == 4:
        return rng.getrandbits(rng.choice((8, 16, 32, 64)))
    if k == 5:
        return None
    if k == 6:
        return rng.choice((True, False))
    if k == 7:
        return ''.join(chr(rng.randrange(32, 127)) for _ in range(rng.randrange(40)))
    if k == 8:
        return rng.randbytes(rng.randrange(80))
    if depth < 3 and k in (9, 10):
        return [rand_value(rng, handles, depth + 1) for _ in range(rng.randrange(8))]
    if depth < 3:
        return {''.join(chr(rng.randrange(97, 123)) for _ in range(rng.randrange(1, 8))):
                rand_value(rng, handles, depth + 1) for _ in range(rng.randrange(4))}
    return rng.randrange(1 << 16)


def rand_body(rng, handles):
    """A random call body: mostly arrays of plausible integers (so that handlers, not only
    the decoder, see them), sometimes anything."""
    if rng.random() < 0.7:
        return [rng.choice(INTERESTING + handles + [rng.randrange(64)])
                for _ in range(rng.randrange(0, 8))]
    return [rand_value(rng, handles) for _ in range(rng.randrange(0, 9))]


def class_random(ctx, res):
    rng = random.Random(ctx.args.seed * 1000 + 1)
    deadline = time.monotonic() + ctx.q(10, 70)
    limit = ctx.q(8000, 80000)
    lock = threading.Lock()
    counts = {'conns': 0, 'frames': 0, 'replies': 0, 'closed': 0, 'waiting': 0, 'open': 0,
              'hello_refused': 0, 'calls_before_close': 0, 'plain_on_tls': 0}
    results = {}
    bad = []
    nops = max(OPS.values())

    def one(i, r):
        addr = ctx.target.addr(i)
        kind = r.randrange(3)
        frames = 0
        # --tls: the bytes go inside TLS (for the frame parser), but a quarter of the garbage
        # on TCP comes in plaintext, for the TLS handshake's own parser
        plain = TLS is not None and kind < 2 and addr != ctx.target.unix and r.random() < 0.25
        if plain:
            with lock:
                counts['plain_on_tls'] += 1
        s = connect(addr, 5, plain=plain)
        try:
            if kind == 0:    # random bytes
                s.sendall(r.randbytes(r.randrange(1, 4096)))
                frames = 1
            elif kind == 1:  # random but well-formed headers, random bodies, no hello
                for _ in range(r.randrange(1, 8)):
                    body = r.randbytes(r.randrange(0, 512))
                    bulk = r.randbytes(r.randrange(0, 1024)) if r.random() < 0.3 else b''
                    flags = r.choice((0, 0, FRAME_ASYNC, FRAME_REPLY, FRAME_PARTIAL,
                                      r.getrandbits(32)))
                    s.sendall(frame(r.randrange(nops + 8), body, bulk, flags,
                                    r.getrandbits(64)))
                    frames += 1
            else:            # a valid hello, then random calls, each waited for
                c = Conn.wrap(s, 0)
                s.settimeout(5)
                if c.call('@hello', hello_body(ctx.token(r.choice(('alpha', 'beta',
                                                                    'gamma')))))[0]:
                    with lock:
                        counts['hello_refused'] += 1
                    return
                dev = c.check('alloc', 'cuMemAlloc_v2', [True, 4096])[1]
                frames = 2
                handles = [dev, dev + 8, dev + 4095, dev + 4096]
                s.settimeout(2)
                for j in range(r.randrange(1, 40)):
                    op = OP_NAMES.get(r.randrange(1, nops + 1))
                    if op in (None, '@hello'):
                        continue
                    bulk = r.randbytes(r.randrange(0, 256)) if r.random() < 0.3 else b''
                    asynchronous = r.random() < 0.2
                    call = c.send(op, rand_body(r, handles), bulk,
                                  FRAME_ASYNC if asynchronous else 0)
                    frames += 1
                    if asynchronous:
                        continue
                    try:
                        got = c.reply(call)
                    except socket.timeout:
                        continue  # a call that waits on something that never comes
                    with lock:
                        counts['replies'] += 1
                        counts['calls_before_close'] += 1
                        results[got[0]] = results.get(got[0], 0) + 1
                return
            # garbage: does the server close on its own, or only once we end?
            if wait_closed(s, 0.25) == 'closed':
                with lock:
                    counts['closed'] += 1
                return
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            with lock:
                counts['waiting' if wait_closed(s, 3) == 'closed' else 'open'] += 1
        except WrongReply as e:
            with lock:
                bad.append(str(e))
        except (OSError, ConnectionError):
            with lock:
                counts['closed'] += 1
        finally:
            s.close()
            with lock:
                counts['conns'] += 1
                counts['frames'] += frames

    def worker(w):
        r = random.Random(rng.getrandbits(64))
        i = w
        while time.monotonic() < deadline:
            with lock:
                if counts['conns'] >= limit:
                    return
            one(i, r)
            i += 8

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(ctx.q(30, 120))
    res.sent = '%d fr/%d conn' % (counts['frames'], counts['conns'])
    res.dropped = counts['closed']
    res.wrong = len(bad)
    top = sorted(results.items(), key=lambda kv: -kv[1])[:6]
    res.notes.append('%d connections closed by the server on its own; %d waited for more '
                     'bytes and closed at our EOF; %d still open 3 s after our EOF; %d replies '
                     'to random calls (results: %s)' % (
                         counts['closed'], counts['waiting'], counts['open'], counts['replies'],
                         ', '.join('%d x%d' % kv for kv in top) or '-'))
    if TLS is not None:
        res.notes.append('TCP connections spoke TLS, except %d of random bytes or frames sent '
                         'in plaintext to the TLS listener' % counts['plain_on_tls'])
    if counts['open']:
        res.fail.append('%d connections still open 3 s after the client\'s EOF' %
                        counts['open'])
    if counts['hello_refused']:
        res.fail.append('%d valid hellos refused' % counts['hello_refused'])
    if bad:
        res.fail.append('%d malformed replies (first: %s)' % (len(bad), bad[0]))


# --- 2. mutated bodies ----------------------------------------------------------------------

def mutate_bytes(b, r):
    b = bytearray(b)
    for _ in range(r.randint(1, 3)):
        k = r.randrange(5)
        if k == 0 and b:     # flip bits
            for _ in range(r.randint(1, 4)):
                b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        elif k == 1:         # insert bytes
            pos = r.randrange(len(b) + 1)
            b[pos:pos] = r.randbytes(r.randint(1, 9))
        elif k == 2 and b:   # delete bytes
            pos = r.randrange(len(b))
            del b[pos:pos + r.randint(1, 9)]
        elif k == 3 and b:   # an interesting msgpack marker
            b[r.randrange(len(b))] = r.choice((0xc0, 0xc2, 0xc3, 0xc4, 0xc6, 0xcf, 0xd3, 0xd9,
                                               0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0x9f, 0x8f, 0xff))
        elif k == 4 and b:   # overwrite a run with 0xff
            pos = r.randrange(len(b))
            b[pos:pos + r.randint(1, 8)] = b'\xff' * min(8, len(b) - pos)
    return bytes(b)


def int_leaves(v, path=()):
    if isinstance(v, bool):
        return []
    if isinstance(v, int):
        return [path]
    if isinstance(v, list):
        return [p for i, x in enumerate(v) for p in int_leaves(x, path + (i,))]
    return []


def lists_in(v, path=()):
    if not isinstance(v, list):
        return []
    return [path] + [p for i, x in enumerate(v) for p in lists_in(x, path + (i,))]


def at(v, path):
    for i in path:
        v = v[i]
    return v


def mutate_value(body, r, handles, frozen=()):
    """A structure-aware mutation: the body stays valid msgpack; integers change (to edge
    values, other handles, neighbours, flipped bits), elements go, come or change type.
    Paths starting with a prefix in frozen keep their integers (launch dimensions: a huge
    valid grid would only be a long kernel, not an attack on the server)."""
    body = json.loads(json.dumps(body))  # a deep copy
    for _ in range(r.randint(1, 3)):
        k = r.randrange(6)
        leaves = [p for p in int_leaves(body) if not any(p[:len(f)] == f for f in frozen)]
        if k <= 2 and leaves:
            p = r.choice(leaves)
            old = at(body, p)
            new = r.choice((r.choice(INTERESTING + handles), old + r.randint(-16, 16),
                            old ^ (1 << r.randrange(64)), r.getrandbits(64)))
            new = max(-(1 << 63), min(new, (1 << 64) - 1))
            at(body, p[:-1])[p[-1]] = new
        elif k == 3:
            lst = at(body, r.choice(lists_in(body)))
            if lst:
                del lst[r.randrange(len(lst))]
        elif k == 4:
            lst = at(body, r.choice(lists_in(body)))
            lst.insert(r.randrange(len(lst) + 1), rand_value(r, handles, 2))
        else:
            p = r.choice(leaves) if leaves else None
            if p:
                at(body, p[:-1])[p[-1]] = rand_value(r, handles, 2)
    return body


def class_mutated(ctx, res):
    rng = random.Random(ctx.args.seed * 1000 + 2)
    deadline = time.monotonic() + ctx.q(10, 70)
    limit = ctx.q(8000, 80000)
    lock = threading.Lock()
    counts = {'conns': 0, 'frames': 0, 'closed': 0, 'survived': 0, 'checked': 0,
              'ctx_broken': 0, 'post_errors': 0, 'replies': 0, 'stale': 0}
    results = {}
    bad, errors, hung = [], [], []

    def one(i, r):
        tenant = ('alpha', 'beta', 'gamma')[i % 3]
        c = Conn(ctx.target.addr(i), ctx.token(tenant), timeout=5)
        frames = 1
        try:
            dev = c.check('alloc', 'cuMemAlloc_v2', [True, 64 * KiB])[1]
            mod = c.check('load', 'cuModuleLoadData', [3], PTX_POKE)[1]
            fn = c.check('function', 'cuModuleGetFunction', [True, mod, 'poke'])[1]
            frames += 3
            sid = CLIENT_ID_BASE + 0x100
            handles = [dev, dev + 4096, dev + 65535, mod, fn, sid]
            templates = [  # opcode, body, bulk, flags, frozen paths
                ('cuMemAlloc_v2', [True, 4096], b'', 0, ()),
                ('cuMemcpyHtoD_v2', [dev, 4096, 0], r.randbytes(4096), 0, ()),
                ('cuMemcpyDtoH_v2', [dev, 4096, 0], b'', 0, ()),
                ('cuMemsetD8_v2', [dev, 7, 4096, 0], b'', 0, ()),
                ('cuMemsetD32_v2', [dev, 7, 1024, 0], b'', 0, ()),
                ('cuMemcpyDtoD_v2', [dev + 8192, dev, 4096, 0], b'', 0, ()),
                ('cuStreamCreate', [sid, 1], b'', FRAME_ASYNC, ()),
                ('cuStreamSynchronize', [sid], b'', 0, ()),
                ('cuLaunchKernel', [fn, [1, 1, 1], [1, 1, 1], 0, 0, [[0, 8], [8, 4]]],
                 struct.pack('<QI', dev, 5), 0, ((1,), (2,))),
                ('cuLaunchKernel', [fn, [2, 1, 1], [32, 1, 1], 0, sid, [[0, 12]]],
                 struct.pack('<QI', dev, 5), FRAME_ASYNC, ((1,), (2,))),
                ('cuMemcpy3D_v2', [2, 0, 64, 4, 1, [dev, 0, 0, 0, 256, 4], None], b'', 0, ()),
                ('cuMemcpy3D_v2', [1, 0, 64, 4, 1, None, [dev, 0, 0, 0, 256, 4]],
                 r.randbytes(256), 0, ()),
                ('cuModuleGetFunction', [True, mod, 'poke'], b'', 0, ()),
                ('cuMemFree_v2', [dev + 4096], b'', 0, ()),
            ]
            call_id = 1000
            for _ in range(r.randint(1, 40)):
                op, body, bulk, flags, frozen = r.choice(templates)
                how = r.random()
                if how < 0.6:
                    body = pack(mutate_value(body, r, handles, frozen))
                elif how < 0.9 or not bulk:
                    body = mutate_bytes(pack(body), r)
                else:
                    body, bulk = pack(body), mutate_bytes(bulk, r)
                body_len = len(body)
                call_id += 1
                c.call_id = call_id
                if r.random() < 0.05:   # a stale length now and then ends the conversation
                    body_len = max(0, body_len + r.choice((-4, -3, -2, -1, 1, 2, 3, 4)))
                    c.send_raw(frame(op, body, bulk, flags, call_id, body_len, len(bulk)))
                    frames += 1
                    c.sock.shutdown(socket.SHUT_WR)
                    state = wait_closed(c.sock, 3)
                    with lock:
                        counts['stale'] += 1
                        if state == 'open':
                            errors.append('a stale-length frame left the session open 3 s '
                                          'after EOF')
                    return
                c.send_raw(frame(op, body, bulk, flags, call_id, body_len, len(bulk)))
                frames += 1
                if not flags & FRAME_ASYNC:
                    try:
                        got = c.reply(call_id)
                    except socket.timeout:
                        with lock:
                            hung.append('%s %s (bulk %d)' % (op, body.hex()[:160], len(bulk)))
                        raise
                    with lock:
                        counts['replies'] += 1
                        results[got[0]] = results.get(got[0], 0) + 1
            # the session survived: a fresh allocation must still copy correctly
            c.call_id = call_id
            r_sync = c.call('cuCtxSynchronize_v2', [])
            dev2 = c.call('cuMemAlloc_v2', [True, 8192])
            frames += 2
            if dev2[0] == SUCCESS:
                data = pattern(8192, i)
                a = c.call('cuMemcpyHtoD_v2', [dev2[1], 8192, 0], data)
                b = c.call('cuMemcpyDtoH_v2', [dev2[1], 8192, 0])
                frames += 2
                if a[0] == SUCCESS and b[0] == SUCCESS:
                    with lock:
                        counts['checked'] += 1
                    if c.last_bulk != data:
                        with lock:
                            bad.append('fresh allocation copied back wrong after mutations')
                elif c.context_error is not None:
                    with lock:
                        counts['ctx_broken'] += 1
                else:
                    with lock:
                        counts['post_errors'] += 1
                        errors.append('copy on fresh memory: %s %s' % (a[:1], b[:1]))
            elif c.context_error is not None:
                with lock:
                    counts['ctx_broken'] += 1
            else:
                with lock:
                    counts['post_errors'] += 1
                    errors.append('alloc after mutations: %s (sync %s)' % (dev2[:1],
                                                                           r_sync[:1]))
            with lock:
                counts['survived'] += 1
        except WrongReply as e:
            with lock:
                bad.append(str(e))
        except socket.timeout:
            with lock:
                errors.append('no reply within 5 s')
        except (OSError, ConnectionError):
            with lock:
                counts['closed'] += 1
        finally:
            c.close()
            with lock:
                counts['conns'] += 1
                counts['frames'] += frames

    def worker(w):
        r = random.Random(rng.getrandbits(64))
        i = w
        while time.monotonic() < deadline:
            with lock:
                if counts['conns'] >= limit:
                    return
            try:
                one(i, r)
            except Refused as e:
                with lock:
                    bad.append('hello refused: %s' % e)
            except (OSError, ConnectionError) as e:
                with lock:
                    counts['closed'] += 1
                    errors.append('setup: %s' % e)
            i += 6

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(ctx.q(40, 150))
    res.sent = '%d fr/%d conn' % (counts['frames'], counts['conns'])
    res.dropped = counts['closed']
    res.wrong = len(bad)
    top = sorted(results.items(), key=lambda kv: -kv[1])[:6]
    res.notes.append('%d sessions closed by the server after a mutated frame, %d ended by a '
                     'frame with a stale length, %d survived (%d then copied a fresh '
                     'allocation correctly, %d had a broken context, %d other errors); %d '
                     'replies to mutated calls (results: %s)' % (
                         counts['closed'], counts['stale'], counts['survived'],
                         counts['checked'],
                         counts['ctx_broken'], counts['post_errors'], counts['replies'],
                         ', '.join('%d x%d' % kv for kv in top) or '-'))
    if errors:
        res.notes.append('first error: %s' % errors[0])
    if hung:
        res.notes.append('%d mutated calls got no reply within 5 s, e.g. %s' % (len(hung),
                                                                             hung[0]))
        if os.environ.get('ATTACK_DEBUG'):
            for h in hung:
                print('hung:', h, file=sys.stderr)
    if bad:
        res.fail.append('%d wrong replies (first: %s)' % (len(bad), bad[0]))


# --- 3. absurd lengths ----------------------------------------------------------------------

HEADER_PROBES = [  # label, opcode, body_len, bulk_len: all over a limit or malformed
    ('hello body 4MiB+1', '@hello', MAX_BODY + 1, 0),
    ('hello body 2^31', '@hello', 1 << 31, 0),
    ('hello body 2^32-1', '@hello', (1 << 32) - 1, 0),
    ('hello bulk 2^32-1', '@hello', 16, (1 << 32) - 1),
    ('hello bulk 2^32', '@hello', 16, 1 << 32),
    ('hello bulk 2^63', '@hello', 16, 1 << 63),
    ('hello bulk 2^64-1', '@hello', 16, (1 << 64) - 1),
    ('module bulk 2GiB+1', 'cuModuleLoadData', 2, MAX_BULK + 1),
    ('module bulk 4GiB', 'cuModuleLoadData', 2, 4 << 30),
    ('module bulk 2^63', 'cuModuleLoadData', 2, 1 << 63),
    ('H2D bulk 8MiB+1', 'cuMemcpyHtoD_v2', 16, (8 << 20) + 1),
    ('H2D bulk 2^64-1', 'cuMemcpyHtoD_v2', 16, (1 << 64) - 1),
    ('launch bulk 1MiB+1', 'cuLaunchKernel', 32, (1 << 20) + 1),
    ('alloc with bulk 1', 'cuMemAlloc_v2', 4, 1),
    ('3D copy bulk 2^63', 'cuMemcpy3D_v2', 16, 1 << 63),
]
WITHIN_LIMIT_PROBES = [  # allowed by the header checks, the rest never sent: informational
    ('hello body 4MiB, never sent', '@hello', MAX_BODY, 0),
    ('module bulk 2GiB, never sent', 'cuModuleLoadData', 2, MAX_BULK),
]


def body_probes(dev, fn):
    m64 = (1 << 64) - 1
    fat = struct.pack('<IHHQ', 0xBA55ED50, 1, 16, m64 - 16) + b'\0' * 48
    elf = bytearray(b'\x7fELF\x02\x01\x01' + b'\0' * 57)
    struct.pack_into('<Q', elf, 0x28, 1 << 62)   # e_shoff
    struct.pack_into('<HH', elf, 0x3a, 64, 0xffff)  # e_shentsize, e_shnum
    return [  # label, opcode, body, bulk
        ('alloc 2^64-1', 'cuMemAlloc_v2', [True, m64], b''),
        ('alloc 2^63', 'cuMemAlloc_v2', [True, 1 << 63], b''),
        ('alloc 2^40 (over quota)', 'cuMemAlloc_v2', [True, 1 << 40], b''),
        ('H2D claims 2^64-1, sends 16', 'cuMemcpyHtoD_v2', [dev, m64, 0], b'x' * 16),
        ('H2D claims 2^63, sends 16', 'cuMemcpyHtoD_v2', [dev, 1 << 63, 0], b'x' * 16),
        ('H2D at dev+2^63', 'cuMemcpyHtoD_v2', [(dev + (1 << 63)) & m64, 16, 0], b'x' * 16),
        ('H2D at 2^64-8, 16 bytes', 'cuMemcpyHtoD_v2', [m64 - 7, 16, 0], b'x' * 16),
        ('D2H 2^63 bytes', 'cuMemcpyDtoH_v2', [dev, 1 << 63, 0], b''),
        ('D2H 2^64-1 bytes', 'cuMemcpyDtoH_v2', [dev, m64, 0], b''),
        ('D2H 4GiB from a 1MiB alloc', 'cuMemcpyDtoH_v2', [dev, 4 << 30, 0], b''),
        ('D2H wrapping 2^64-8', 'cuMemcpyDtoH_v2', [m64 - 7, 16, 0], b''),
        ('memset8 2^62', 'cuMemsetD8_v2', [dev, 0, 1 << 62, 0], b''),
        ('memset16 2^63 (x2 wraps)', 'cuMemsetD16_v2', [dev, 0, 1 << 63, 0], b''),
        ('memset32 2^62 (x4 wraps)', 'cuMemsetD32_v2', [dev, 0, 1 << 62, 0], b''),
        ('DtoD 2^64-1', 'cuMemcpyDtoD_v2', [dev, dev, m64, 0], b''),
        ('3D D2H 2^32 x 2^32', 'cuMemcpy3D_v2',
         [2, 0, 1 << 32, 1 << 32, 1, [dev, 0, 0, 0, 1 << 32, 1 << 32], None], b''),
        ('3D H2D width*height wraps', 'cuMemcpy3D_v2',
         [1, 0, 1 << 33, 1 << 31, 1, None, [dev, 0, 0, 0, 1 << 33, 1 << 31]], b'x' * 64),
        ('3D pitch 2^63', 'cuMemcpy3D_v2',
         [2, 0, 16, 4, 1, [dev, 0, 0, 0, 1 << 63, 4], None], b''),
        ('launch grid 2^31', 'cuLaunchKernel',
         [fn, [1 << 31, 1, 1], [1, 1, 1], 0, 0, [[0, 8], [8, 4]]], b'\0' * 12),
        ('launch grid 0', 'cuLaunchKernel',
         [fn, [0, 1, 1], [1, 1, 1], 0, 0, [[0, 8], [8, 4]]], b'\0' * 12),
        ('launch shared 2^32-1', 'cuLaunchKernel',
         [fn, [1, 1, 1], [1, 1, 1], (1 << 32) - 1, 0, [[0, 8], [8, 4]]], b'\0' * 12),
        ('launch param offset 2^63', 'cuLaunchKernel',
         [fn, [1, 1, 1], [1, 1, 1], 0, 0, [[0, 8], [1 << 63, 4]]], b'\0' * 12),
        ('launch param size 2^64-1', 'cuLaunchKernel',
         [fn, [1, 1, 1], [1, 1, 1], 0, 0, [[0, 8], [4, m64]]], b'\0' * 12),
        ('module PTX without NUL', 'cuModuleLoadData', [3], PTX_POKE[:-1]),
        ('module 1 byte', 'cuModuleLoadData', [3], b'\0'),
        ('module fatbin claiming 2^64', 'cuModuleLoadData', [3], fat),
        ('module ELF with huge section table', 'cuModuleLoadData', [3], bytes(elf)),
    ]


def class_lengths(ctx, res):
    r = random.Random(ctx.args.seed * 1000 + 3)
    conns = frames = 0
    open_over, wrong = [], []
    rss0 = (proc_stats(ctx.target.child) or (0,))[0]
    for pre in (True, False):
        for i, (label, op, body_len, bulk_len) in enumerate(HEADER_PROBES):
            s = connect(ctx.target.addr(i), 5)
            conns += 1
            try:
                if not pre:
                    s.sendall(frame('@hello', pack(hello_body(ctx.token('alpha')))))
                    frames += 1
                s.sendall(HEADER.pack(MAGIC, VERSION, OPS[op], 0, body_len & 0xffffffff, 7,
                                      bulk_len) + r.randbytes(64))
                frames += 1
                state = wait_closed(s, HEADER_CLOSE_S)
            except OSError:
                state = 'closed'
            finally:
                s.close()
            if state == 'closed':
                res.dropped += 1
            else:
                open_over.append('%s%s' % (label, '' if pre else ' (after hello)'))
    held = []
    for i, (label, op, body_len, bulk_len) in enumerate(WITHIN_LIMIT_PROBES):
        s = connect(ctx.target.addr(i), 5)
        conns += 1
        frames += 1
        try:
            s.sendall(HEADER.pack(MAGIC, VERSION, OPS[op], 0, body_len, 7, bulk_len) + b'\x92')
            if wait_closed(s, 1.0) == 'open':
                held.append(label)
        except OSError:
            pass
        finally:
            s.close()
    # absurd sizes inside well-formed bodies, each in a session of its own
    accepted, closed = [], []
    for i, (label, op, body, bulk) in enumerate(body_probes(0, 0)):
        c = Conn(ctx.target.addr(i), ctx.token('alpha'), timeout=10)
        conns += 1
        frames += 1
        try:
            dev = c.check('alloc', 'cuMemAlloc_v2', [True, 1 * MiB])[1]
            mod = c.check('load', 'cuModuleLoadData', [3], PTX_POKE)[1]
            fn = c.check('function', 'cuModuleGetFunction', [True, mod, 'poke'])[1]
            frames += 3
            label, op, body, bulk = body_probes(dev, fn)[i]
            got = c.call(op, body, bulk)
            frames += 1
            if got[0] == SUCCESS:
                accepted.append(label)
            # and the session still answers a valid call
            c.check('alloc after the probe', 'cuMemAlloc_v2', [True, 4096])
            frames += 1
        except WrongReply as e:
            wrong.append('%s: %s' % (label, e))
        except (OSError, ConnectionError):
            closed.append(label)
        finally:
            c.close()
    res.sent = '%d fr/%d conn' % (frames, conns)
    res.dropped += len(closed)
    res.wrong = len(wrong) + len(accepted)
    st = proc_stats(ctx.target.child)
    if st and st[0] - rss0 > DRIP_RSS_MAX:
        res.fail.append('RSS grew %d MiB' % ((st[0] - rss0) >> 20))
    if open_over:
        res.fail.append('%d over-limit headers not closed within %.0f s: %s' % (
            len(open_over), HEADER_CLOSE_S, ', '.join(open_over[:4])))
    if accepted:
        res.fail.append('absurd sizes answered success: %s' % ', '.join(accepted))
    if wrong:
        res.fail.append('%d wrong replies (first: %s)' % (len(wrong), wrong[0]))
    res.notes.append('%d/%d over-limit headers closed; body probes: %d refused with an '
                     'error, %d closed the session (%s)' % (
                         2 * len(HEADER_PROBES) - len(open_over), 2 * len(HEADER_PROBES),
                         len(body_probes(0, 0)) - len(accepted) - len(closed) - len(wrong),
                         len(closed), ', '.join(closed) or 'none'))
    res.notes.append('within-limit headers the server keeps waiting on (not a verdict): %s' % (
        ', '.join(held) or 'none'))


# --- 4. truncated frames and slow drip ------------------------------------------------------

def conversation(token):
    """A valid conversation (hello, alloc, memory info, a bad free, sync) and the offsets
    where its frames end."""
    out = [frame('@hello', pack(hello_body(token)), call_id=1),
           frame('cuMemAlloc_v2', pack([True, 4096]), call_id=2),
           frame('cuMemGetInfo_v2', pack([True, True]), call_id=3),
           frame('cuMemFree_v2', pack([12345]), call_id=4),
           frame('cuCtxSynchronize_v2', pack([]), call_id=5)]
    ends, pos = [], 0
    for f in out:
        pos += len(f)
        ends.append(pos)
    return b''.join(out), ends


def class_drip(ctx, res):
    r = random.Random(ctx.args.seed * 1000 + 4)
    conv, ends = conversation(ctx.token('beta'))
    conns = frames = watched = 0
    not_closed = 0
    # truncated conversations: cut anywhere, then EOF, a reset, or a plain close
    truncated = ctx.q(120, 600)
    for i in range(truncated):
        cut = r.randrange(1, len(conv))
        s = connect(ctx.target.addr(i), 5)
        conns += 1
        frames += 1 + sum(1 for e in ends if e < cut)  # whole frames and the cut one
        try:
            s.sendall(conv[:cut])
            how = i % 3
            if how == 0:
                watched += 1
                s.shutdown(socket.SHUT_WR)
                if wait_closed(s, 3) == 'open':
                    not_closed += 1
                else:
                    res.dropped += 1
            elif how == 1:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        except OSError:
            res.dropped += 1
        finally:
            s.close()
    if not_closed:
        res.fail.append('%d truncated conversations not closed 3 s after EOF' % not_closed)
    # slow drip: K connections, one byte per 100 ms each, for a bounded time
    k = ctx.q(8, 32)
    seconds = ctx.q(6.0, 30.0)
    drips = []
    for i in range(k):
        try:
            drips.append([connect(ctx.target.addr(i), 5), 0, None])  # socket, sent, dropped
            conns += 1
        except OSError:
            res.dropped += 1
    probes, slow = [], []
    rss0 = (proc_stats(ctx.target.child) or (0,))[0]
    start = time.monotonic()
    end = start + seconds
    next_probe = start + 1.0
    while time.monotonic() < end:
        t0 = time.monotonic()
        for d in drips:
            if d[2] is not None or d[1] >= len(conv):
                continue
            try:
                d[0].sendall(conv[d[1]:d[1] + 1])
                d[1] += 1
            except OSError:  # the server dropped it (seen at the send after its close)
                d[2] = time.monotonic() - start
        if time.monotonic() >= next_probe:
            next_probe += 2.0
            try:
                took = real_client(ctx.target.addr(len(probes)), ctx.token('gamma'))
                probes.append(took)
                if took > REAL_CLIENT_MAX_S:
                    slow.append(took)
            except WrongReply as e:
                res.wrong += 1
                slow.append(str(e))
            except Exception as e:
                slow.append('%s: %s' % (type(e).__name__, e))
        time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
    dropped_at = sorted(d[2] for d in drips if d[2] is not None)
    dropped = len(dropped_at)
    full_hello = 32 + len(pack(hello_body(ctx.token('beta'))))
    served = 0
    for d in drips:
        if d[2] is not None:
            d[0].close()
            continue
        if d[1] >= full_hello:  # the hello went through: it must have been answered
            c = Conn.wrap(d[0], 5)
            d[0].settimeout(5)
            try:
                if c.reply(1)[0] == SUCCESS:
                    served += 1
                else:
                    res.wrong += 1
            except WrongReply:
                res.wrong += 1
            except OSError:
                pass
        d[0].close()
    res.dropped += dropped
    rss1 = (proc_stats(ctx.target.child) or (0,))[0]
    res.sent = '%d fr/%d conn, %d drip B' % (frames, conns, sum(d[1] for d in drips))
    res.notes.append('%d truncated conversations (cut anywhere, then an EOF, a reset or a '
                     'close): %d of the %d ending in an EOF closed by the server within 3 s' % (
                         truncated, watched - not_closed, watched))
    res.notes.append('%d drips of %d dropped by the server '
                     'within %.0f s (%s; at most %d bytes dripped, a hello is %d; %d drips '
                     'answered a hello dripped whole); real-client probes: %s s' % (
                         dropped, k, seconds,
                         'after %.1f-%.1f s' % (dropped_at[0], dropped_at[-1])
                         if dropped_at else 'none',
                         max((d[1] for d in drips), default=0), full_hello, served,
                         ', '.join('%.2f' % p for p in probes)))
    if slow:
        res.fail.append('real client not served within %.0f s during the drip: %s' % (
            REAL_CLIENT_MAX_S, slow[0]))
    if not probes:
        res.fail.append('no real client served during the drip')
    if rss1 - rss0 > DRIP_RSS_MAX:
        res.fail.append('RSS grew %d MiB during the drip' % ((rss1 - rss0) >> 20))


# --- 5. pre-authentication bulk -------------------------------------------------------------

def class_preauth(ctx, res):
    n = ctx.q(2, 4)
    per_conn = ctx.q(384 * MiB, 1 * GiB)
    seconds = ctx.q(20.0, 45.0)
    ctx.monitor.reset_peak()
    rss0 = (proc_stats(ctx.target.child) or (0,))[0]
    chunk = b'\0' * MiB
    sent = [0] * n
    outcome = [''] * n
    socks = []
    end = time.monotonic() + seconds

    def push(i):
        try:
            s = connect(ctx.target.addr(i), 5)
        except OSError as e:
            outcome[i] = 'refused (%s)' % e
            return
        socks.append(s)
        try:
            s.sendall(frame('cuModuleLoadData', pack([3]), bulk_len=MAX_BULK, call_id=1))
            while sent[i] < per_conn and time.monotonic() < end:
                s.sendall(chunk)
                sent[i] += len(chunk)
            outcome[i] = 'all sent' if sent[i] >= per_conn else 'time limit'
        except socket.timeout:
            outcome[i] = 'server stopped reading'
        except OSError as e:
            outcome[i] = 'dropped (%s)' % type(e).__name__

    threads = [threading.Thread(target=push, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 10)
    time.sleep(1.0)  # what the server holds now
    ctx.monitor.sample()
    held = (proc_stats(ctx.target.child) or (0,))[0]
    peak = (ctx.monitor.peak or (held,))[0]
    still_open = sum(1 for s in socks if wait_closed(s, 0.2) == 'open')
    for s in socks:
        s.close()
    res.sent = '%d conn, %d MiB' % (n, sum(sent) >> 20)
    res.dropped = sum(1 for o in outcome if o.startswith(('dropped', 'refused')))
    growth = max(peak, held) - rss0
    res.notes.append('each connection declared a 2 GiB module load as its first frame, no '
                     'hello; sent %s MiB (%s); RSS %d MiB before, %d MiB peak, %d MiB held '
                     '1 s after; %d connections still open' % (
                         '/'.join(str(x >> 20) for x in sent), ', '.join(outcome),
                         rss0 >> 20, peak >> 20, held >> 20, still_open))
    if growth >= PREAUTH_RSS_MAX:
        res.fail.append('RSS grew %d MiB from unauthenticated bulk (limit %d MiB)' % (
            growth >> 20, PREAUTH_RSS_MAX >> 20))


# --- 6. idle connection flood ---------------------------------------------------------------

ATTACKER_SOURCE = '127.0.0.2'  # class 6: the idle flood's TCP connections come from here
ATTACKER_UID = 65534           # class 6: and its Unix-socket ones from this user (as root)


def other_user_flood(path, n, seconds):
    """Opens up to n idle connections to the Unix socket at path as another local user, in
    a child process; returns (pid, reader, writer): the child writes 'opened N refused M'
    once it has them, holds them until the writer closes, then writes how many the server
    had closed, and exits. None when this process cannot switch users."""
    if os.geteuid() != 0:
        return None
    d = os.path.dirname(path)
    while d != '/':  # the other user must reach the socket
        mode = os.stat(d).st_mode
        if not mode & 0o001:
            os.chmod(d, mode | 0o011)
        d = os.path.dirname(d)
    os.chmod(path, 0o777)
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other user
        code = 0
        try:
            os.close(up_r)
            os.close(down_w)
            os.setgid(ATTACKER_UID)
            os.setuid(ATTACKER_UID)
            socks, refused, end = [], 0, time.monotonic() + seconds
            for _ in range(n):
                if time.monotonic() > end:
                    break
                try:
                    socks.append(connect('unix:' + path, 2))
                except OSError as e:
                    refused += 1
                    if refused == 1:
                        os.write(2, b'attack.py: as uid %d: %s\n' % (ATTACKER_UID,
                                                                   str(e).encode()))
            os.write(up_w, b'opened %d refused %d\n' % (len(socks), refused))
            os.read(down_r, 1)  # until the parent is done
            closed = 0
            for c in socks:
                try:
                    closed += readable(c, 0) and not c.recv(1)
                except OSError:
                    closed += 1
            os.write(up_w, b'closed %d\n' % closed)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(up_w)
    os.close(down_r)
    return pid, up_r, down_w


def class_idle(ctx, res):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    want = ctx.q(300, 2000)
    n = min(want, max(16, soft - 256))
    if n < want:
        res.notes.append('fd limit %d: %d connections instead of %d' % (soft, n, want))
    try:
        with open('/proc/%d/limits' % ctx.target.child) as f:
            lim = re.search(r'Max open files\s+(\d+)\s+(\d+)', f.read())
        res.notes.append('the server process may open %s files (soft)' % lim.group(1))
    except (OSError, AttributeError, TypeError):
        pass
    # half the flood over TCP from another loopback address (another host, as the server
    # sees it), half over the Unix socket from another local user when this process may
    # switch users (another tenant on the server's host), else from this one
    flood = other_user_flood(split_local(ctx.target.unix)[1], n - n // 2, ctx.q(20.0, 60.0))
    flood_said = b''
    if flood:
        flood_said = b''
        while not flood_said.endswith(b'\n'):
            chunk = os.read(flood[1], 64)
            if not chunk:
                break
            flood_said += chunk
        res.notes.append('the Unix-socket half came from uid %d: %s' % (
            ATTACKER_UID, flood_said.decode().strip()))
    source = ATTACKER_SOURCE
    try:
        probe = connect(ctx.target.tcp, 2, source, plain=True)
        probe.close()
    except OSError as e:
        res.notes.append('cannot connect from %s (%s): the TCP flood comes from 127.0.0.1, '
                         'as the real client does' % (source, e))
        source = None
    st0 = proc_stats(ctx.target.child) or (0, 0, 0)
    socks, refused, why = [], 0, {}
    end = time.monotonic() + ctx.q(20.0, 60.0)
    for i in range(n):
        if time.monotonic() > end:
            res.notes.append('stopped opening at %d: time limit' % i)
            break
        if flood and ctx.target.addr(i) == ctx.target.unix:
            continue  # the other user holds those
        try:  # bare TCP even with --tls: the class is about the connection itself
            socks.append(connect(ctx.target.addr(i), 2, source, plain=True))
        except OSError as e:
            refused += 1
            key = '%s %s' % ('TCP' if i % 2 else 'Unix', 'EAGAIN (listen backlog full)'
                             if isinstance(e, BlockingIOError) else type(e).__name__)
            why[key] = why.get(key, 0) + 1
    time.sleep(1.0)
    ctx.monitor.sample()
    st1 = proc_stats(ctx.target.child) or (0, 0, 0)

    gone = set()

    def closed_now():
        """How many idle connections the server closed since the last look."""
        n = 0
        for s in socks:
            if s in gone:
                continue
            try:
                closed = readable(s, 0) and not s.recv(1)
            except OSError:
                closed = True
            if closed:
                gone.add(s)
                n += 1
        return n

    early = closed_now()
    probes = {}  # the verdict's: clients that are not the attacker's address
    for label, addr, src in (('TCP from 127.0.0.1', ctx.target.tcp, None),
                             ('Unix socket', ctx.target.unix, None),
                             ('TCP from the flood\'s own address', ctx.target.tcp, source)):
        if label.endswith('own address') and not source:
            continue
        try:
            probes[label] = real_client(addr, ctx.token('gamma'), timeout=REAL_CLIENT_MAX_S + 3,
                                        source=src)
        except WrongReply as e:
            res.wrong += 1
            probes[label] = 'wrong: %s' % e
        except Exception as e:
            probes[label] = '%s: %s' % (type(e).__name__, e)
    hold = ctx.q(3.0, 12.0)
    time.sleep(hold)
    ctx.monitor.sample()
    st2 = proc_stats(ctx.target.child) or (0, 0, 0)
    late = closed_now()
    if flood:
        os.close(flood[2])
        said = os.read(flood[1], 64).decode().split()
        os.waitpid(flood[0], 0)
        os.close(flood[1])
        if len(said) == 2 and said[0] == 'closed':
            late += int(said[1])
        opened = flood_said.decode().split()
        if len(opened) == 4:
            refused += int(opened[3])
    for s in socks:
        s.close()
    time.sleep(2.0)
    res.sent = '%d conn' % n
    res.dropped = refused + early + late
    show = lambda p: '%.2f s' % p if isinstance(p, float) else p
    res.notes.append('%d idle connections (%d over TCP from %s, %d over the Unix socket): '
                     '%d refused at connect, %d closed by the server within 1 s, %d more '
                     'closed %.0f s later; server fds %d -> %d, threads %d -> %d, RSS %d -> '
                     '%d MiB' % (n, n // 2, source or '127.0.0.1',
                                 n - n // 2, refused, early, late, hold + 1, st0[2],
                                 max(st1[2], st2[2]), st0[1], max(st1[1], st2[1]),
                                 st0[0] >> 20, max(st1[0], st2[0]) >> 20))
    if TLS is not None:
        res.notes.append('the TCP half never began TLS (bare TCP); the real clients spoke TLS')
    if why:
        res.notes.append('refused at connect: %s' % ', '.join('%s x%d' % kv
                                                             for kv in sorted(why.items())))
    res.notes.append('real clients meanwhile: %s' % '; '.join(
        '%s %s' % (k, show(v)) for k, v in probes.items()))
    bad = [(k, v) for k, v in probes.items() if not k.endswith('own address') and
           (not isinstance(v, float) or v > REAL_CLIENT_MAX_S)]
    if bad:
        res.fail.append('real client (%s) not served within %.0f s: %s' % (
            bad[0][0], REAL_CLIENT_MAX_S, show(bad[0][1])))
    growth = max(st1[1], st2[1]) - st0[1]
    if growth >= IDLE_THREADS_MAX:
        res.fail.append('threads grew by %d with %d idle connections (limit %d)' % (
            growth, len(socks), IDLE_THREADS_MAX))


# --- 7. non-reading client ------------------------------------------------------------------

def class_nonreader(ctx, res):
    copies, size = 40, 64 * MiB
    seconds = ctx.q(10.0, 25.0)
    ctx.monitor.reset_peak()
    rss0 = (proc_stats(ctx.target.child) or (0,))[0]
    c = Conn(ctx.target.tcp, ctx.token('alpha'), timeout=10)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * KiB)
    dev = c.check('alloc 64 MiB', 'cuMemAlloc_v2', [True, size])[1]
    c.check('memset', 'cuMemsetD8_v2', [dev, 0x5a, size, 0])
    sent = 0
    try:
        for _ in range(copies):
            c.send('cuMemcpyDtoH_v2', [dev, size, 0])
            sent += 1
    except OSError as e:
        res.notes.append('sending stopped after %d copies: %s' % (sent, e))
    end = time.monotonic() + seconds
    served, slow, lat = 0, [], []
    other = None
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            if other is None:
                other = Conn(ctx.target.unix, ctx.token('beta'), timeout=5)
            roundtrip(other, 1 * MiB, served)
            took = time.monotonic() - t0
            lat.append(took)
            served += 1
            if took > REAL_CLIENT_MAX_S:
                slow.append('%.2f s' % took)
        except WrongReply as e:
            res.wrong += 1
            slow.append('wrong: %s' % e)
            other.close()
            other = None
        except Exception as e:
            slow.append('%s: %s' % (type(e).__name__, e))
            if other:
                other.close()
            other = None
        time.sleep(0.2)
    during = (proc_stats(ctx.target.child) or (0,))[0]
    c.close()
    if other:
        other.close()
    time.sleep(3.0)
    ctx.monitor.sample()
    after = (proc_stats(ctx.target.child) or (0,))[0]
    peak = max((ctx.monitor.peak or (0,))[0], during)  # the most it held, at any moment
    res.sent = '%d x 64 MiB' % sent
    growth = peak - rss0
    res.notes.append('%d copies of 64 MiB asked for, no reply read: RSS %d MiB before, %d MiB '
                     'peak, %d MiB at the end, %d MiB 3 s after the client closed; the other '
                     'client made %d checked round trips (max %.2f s)' % (
                         sent, rss0 >> 20, peak >> 20, during >> 20, after >> 20, served,
                         max(lat, default=0)))
    if growth >= NONREADER_RSS_MAX:
        res.fail.append('RSS grew %d MiB for unread replies (limit %d MiB)' % (
            growth >> 20, NONREADER_RSS_MAX >> 20))
    if slow or not served:
        res.fail.append('other client not served within %.0f s: %s' % (
            REAL_CLIENT_MAX_S, slow[0] if slow else 'no round trip completed'))


# --- 8. over-read launch --------------------------------------------------------------------

def class_overread(ctx, res):
    c = Conn(ctx.target.tcp, ctx.token('beta'), timeout=10)
    frames = 1
    try:
        mod = c.check('load the leak kernel (PTX text)', 'cuModuleLoadData', [3], ptx_leak())[1]
        fn = c.check('its function', 'cuModuleGetFunction', [True, mod, 'leak'])[1]
        out_size = 2 * LEAK_COPY
        out = c.check('alloc', 'cuMemAlloc_v2', [True, out_size])[1]
        frames += 3

        def clear():
            c.check('memset', 'cuMemsetD8_v2', [out, 0, out_size, 0])

        def result():
            c.check('sync', 'cuCtxSynchronize_v2', [])
            c.check('copy back', 'cuMemcpyDtoH_v2', [out, out_size, 0])
            return c.last_bulk

        # control: the full parameter buffer works and the kernel copies what it was given
        blob = pattern(LEAK_BLOB, 42)
        clear()
        r = c.call('cuLaunchKernel', [fn, [1, 1, 1], [1, 1, 1], 0, 0, [[0, 8], [8, LEAK_BLOB]]],
                   struct.pack('<Q', out) + blob)
        frames += 2
        if r[0] != SUCCESS:
            res.fail.append('control launch with the full parameter buffer failed (%d): the '
                            'script\'s kernel is not usable' % r[0])
            return
        got = result()
        frames += 2
        if got != blob[:LEAK_COPY] + blob[-LEAK_COPY:]:
            res.wrong += 1
            res.fail.append('control launch copied the wrong bytes')
        res.notes.append('control launch (layout [[0,8],[8,%d]], %d-byte buffer): ok' % (
            LEAK_BLOB, 8 + LEAK_BLOB))
        for layout, extra in (([[0, 8], [8, 0]], b''), ([[0, 8], [8, 16]], b'\x11' * 16)):
            clear()
            buf = struct.pack('<Q', out) + extra
            r = c.call('cuLaunchKernel', [fn, [1, 1, 1], [1, 1, 1], 0, 0, layout], buf)
            frames += 2
            desc = 'layout %s with a %d-byte buffer' % (json.dumps(layout), len(buf))
            if r[0] == INVALID_VALUE:
                res.dropped += 1
                res.notes.append('%s: refused with 1' % desc)
                continue
            if r[0] != SUCCESS:
                res.fail.append('%s: refused with %d, not 1' % (desc, r[0]))
                continue
            try:
                got = result()
                frames += 2
                leaked = sum(1 for b in got if b)
                what = ('the kernel read %d bytes past the client\'s buffer; %d of the %d bytes '
                        'it copied back are non-zero server memory' % (
                            LEAK_BLOB - len(extra), leaked, out_size))
            except (WrongReply, OSError) as e:
                what = 'and then: %s' % e
            res.fail.append('%s: launched (result 0), not refused' % desc)
            res.notes.append('%s: accepted; %s' % (desc, what))
    finally:
        c.close()
        res.sent = '%d fr/1 conn' % frames


# --- 9. many well-behaved clients -----------------------------------------------------------

def class_many(ctx, res):
    n = 64
    iters = ctx.q(40, 300)
    deadline = time.monotonic() + ctx.q(25.0, 120.0)
    lock = threading.Lock()
    counts = {'ops': 0, 'wrong': 0, 'failed': 0, 'frames': 0}
    problems = []
    tenants = list(TENANTS)
    sizes = (1, 7, 4096, 65536 + 3, 1 * MiB)

    def client(i):
        r = random.Random(ctx.args.seed * 100000 + i)
        c = None
        try:
            c = Conn(ctx.target.addr(i), ctx.token(tenants[i % 4]), timeout=15,
                     program='attack.py client %d' % i)
            for k in range(iters):
                if time.monotonic() > deadline:
                    break
                roundtrip(c, r.choice(sizes), i * 1000 + k)
                with lock:
                    counts['ops'] += 1
                    counts['frames'] += 6
        except WrongReply as e:
            with lock:
                counts['wrong'] += 1
                problems.append('client %d wrong: %s' % (i, e))
        except Exception as e:
            with lock:
                counts['failed'] += 1
                problems.append('client %d failed: %s: %s' % (i, type(e).__name__, e))
        finally:
            if c:
                c.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, deadline - time.monotonic() + 20))
    res.sent = '%d fr/%d conn' % (counts['frames'] + n, n)
    res.wrong = counts['wrong']
    res.notes.append('%d checked round trips (alloc, up, down, memset, down, free) by %d '
                     'clients of %d tenants' % (counts['ops'], n, len(tenants)))
    if counts['wrong'] or counts['failed']:
        res.fail.append('%d wrong, %d failed clients (first: %s)' % (
            counts['wrong'], counts['failed'], problems[0]))


# --- 10. clients SIGKILLed mid-copy ---------------------------------------------------------

def child_main(mode, addr, token, seconds=30.0):
    """A client process that starts a large copy and is killed in it (class 10)."""
    c = Conn(addr, token, timeout=10, program='attack.py child %s' % mode)
    devs = [c.check('alloc', 'cuMemAlloc_v2', [True, 64 * MiB])[1] for _ in range(4)]
    print('READY', flush=True)
    end = time.monotonic() + seconds
    chunk = b'\xab' * (8 * MiB)
    while time.monotonic() < end:
        if mode == 'h2d':  # 8 MiB frames of asynchronous copies, back to back
            for dev in devs:
                for off in range(0, 64 * MiB, 8 * MiB):
                    c.send('cuMemcpyHtoDAsync_v2', [dev + off, 8 * MiB, 0], chunk, FRAME_ASYNC)
        elif mode == 'd2h':  # a 64 MiB copy down, read slowly
            c.send('cuMemcpyDtoH_v2', [devs[0], 64 * MiB, 0])
            c.sock.settimeout(10)
            got = 0
            while got < 64 * MiB and time.monotonic() < end:
                k = len(c.sock.recv(256 * KiB))
                if not k:
                    return 1
                got += k
                time.sleep(0.002)
        else:  # waiting copies up, the reply never read
            for dev in devs:
                c.send('cuMemcpyHtoD_v2', [dev, 8 * MiB, 0], chunk)
    return 0


def class_sigkill(ctx, res):
    kills = ctx.q(6, 30)
    tenant = 'gamma'
    modes = ('h2d', 'd2h', 'h2d-wait')
    r = random.Random(ctx.args.seed * 1000 + 10)

    def settle(want, seconds):
        deadline = time.monotonic() + seconds
        while True:
            got = (ctx.target.tenant_metric('memory_used_bytes', tenant),
                   ctx.target.tenant_metric('sessions', tenant))
            if got == want or time.monotonic() > deadline:
                return got
            time.sleep(0.1)

    def copied():
        v = ctx.target.metrics_values()
        return sum(v.get(('cuda_remote_tenant_copy_bytes_total',
                          (('direction', d), ('tenant', tenant))), 0) for d in ('h2d', 'd2h'))

    base = settle((0.0, 0.0), 5)
    copied0 = copied()
    if base != (0.0, 0.0):
        res.notes.append('tenant %s held %s before the kills' % (tenant, base))
    leaks, release = [], []
    done = 0
    end = time.monotonic() + ctx.q(40.0, 180.0)
    for i in range(kills):
        if time.monotonic() > end:
            res.notes.append('stopped after %d kills: time limit' % i)
            break
        mode = modes[i % len(modes)]
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), '--child', mode,
                              '--child-addr', ctx.target.addr(i), '--child-token',
                              ctx.token(tenant)] + (['--child-ca', ctx.pki[0]] if ctx.pki
                                                    else []), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        ctx.children.append(p)
        ready = readable(p.stdout, 10) and p.stdout.readline()
        if ready != 'READY\n':
            p.kill()
            p.wait()
            res.fail.append('child %d (%s) did not start: %r' % (i, mode, ready))
            continue
        time.sleep(r.uniform(0.05, 0.6))
        p.send_signal(signal.SIGKILL)
        p.wait()
        done += 1
        t0 = time.monotonic()
        got = settle(base, RELEASE_S)
        if got != base:
            leaks.append('kill %d (%s): %s bytes / %s sessions still held after %.0f s' % (
                i, mode, got[0], got[1], RELEASE_S))
            base = got  # what is leaked stays leaked: measure the next kill from here
        else:
            release.append(time.monotonic() - t0)
    res.sent = '%d killed' % done
    res.notes.append('%d clients killed mid-copy (%s; %d MiB copied by them in all); memory '
                     'back in %s s' % (done, '/'.join(modes), (copied() - copied0) // MiB,
                                       ', '.join('%.1f' % x for x in release) or '-'))
    if leaks:
        res.fail.append('%d kills left memory or sessions behind: %s' % (len(leaks), leaks[0]))


# --- 11. the server process SIGKILLed -------------------------------------------------------

def class_server_kill(ctx, res):
    t = ctx.target
    ctx.monitor.sample()
    victim = t.child
    if not victim:
        res.fail.append('no server process found to kill')
        return
    ctx.monitor.expect_until = time.time() + RESTART_SERVE_S + 5
    os.kill(victim, signal.SIGKILL)
    t0 = time.monotonic()
    served_in, last = None, None
    tries = 0
    while time.monotonic() - t0 < RESTART_SERVE_S:
        tries += 1
        try:
            real_client(t.addr(tries), ctx.token('alpha'), timeout=3)
            served_in = time.monotonic() - t0
            break
        except WrongReply as e:
            res.wrong += 1
            last = 'wrong: %s' % e
        except Exception as e:
            last = '%s: %s' % (type(e).__name__, e)
        time.sleep(0.2)
    ctx.monitor.sample()
    res.sent = 'kill -9 %d' % victim
    sup = 'the supervisor is alive' if t.alive() else \
        'the supervisor exited with %s' % t.server.proc.returncode
    if served_in is None:
        res.fail.append('no new client served within %.0f s of the kill (%s; last try: %s)' % (
            RESTART_SERVE_S, sup, last))
    else:
        res.notes.append('new client served %.2f s after the kill; new server process %s' % (
            served_in, t.child))
    res.notes.append('%s after its server process (pid %d) got SIGKILL' % (sup, victim))


# --- 12. TLS load ---------------------------------------------------------------------------

def class_tls_load(ctx, res):
    n = LOAD_CLIENTS
    calls = ctx.args.load_calls or ctx.q(LOAD_CALLS_QUICK, LOAD_CALLS)
    deadline = time.monotonic() + ctx.q(LOAD_SECONDS_QUICK, LOAD_SECONDS)
    lock = threading.Lock()
    counts = {'calls': 0, 'wrong': 0, 'lost': 0, 'failed': 0, 'bytes': 0}
    problems = []
    done_calls = [0] * n
    tenants = list(TENANTS)
    loaded = threading.Event()   # every client has made its calls (or given up)
    release = threading.Event()  # then they close their connections
    finished = [0]

    def client(i):
        r = random.Random(ctx.args.seed * 100000 + 12000 + i)
        c, done, k = None, 0, 0
        try:
            c = Conn(ctx.target.tcp, ctx.token(tenants[i % 4]), timeout=LOAD_REPLY_S,
                     program='attack.py tls-load %d' % i)
            while done < calls and time.monotonic() < deadline:
                k += 1
                if calls - done < 6:  # the last few: synchronizations, checked too
                    c.check('synchronize', 'cuCtxSynchronize_v2', [])
                    got, size = 1, 0
                else:
                    size = LOAD_BIG if r.random() < LOAD_BIG_SHARE else r.choice(LOAD_SIZES)
                    got = roundtrip(c, size, i * 1000000 + k)
                done += got
                with lock:
                    counts['calls'] += got
                    counts['bytes'] += (3 if got == 6 else 2) * size
            if c.stray:
                raise WrongReply('%d replies to calls it never waited for' % c.stray)
        except WrongReply as e:
            with lock:
                counts['wrong'] += 1
                problems.append('client %d wrong after %d calls: %s' % (i, done, e))
        except socket.timeout:
            with lock:
                counts['lost'] += 1
                problems.append('client %d: no reply within %.0f s (a lost reply) after %d '
                                'calls' % (i, LOAD_REPLY_S, done))
        except Exception as e:
            with lock:
                counts['failed'] += 1
                problems.append('client %d failed after %d calls: %s: %s' % (
                    i, done, type(e).__name__, e))
        finally:
            done_calls[i] = done
            with lock:
                finished[0] += 1
                if finished[0] == n:
                    loaded.set()
            release.wait(60)
            if c:
                c.close()

    series = []  # (seconds, calls so far, rss, threads)

    def sample(t0):
        st = proc_stats(ctx.target.child) or (0, 0, 0)
        with lock:
            series.append((time.monotonic() - t0, counts['calls'], st[0], st[1]))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    sample(t0)
    for t in threads:
        t.start()
    period = ctx.q(1.0, 5.0)
    while not loaded.wait(period):
        sample(t0)
        if time.monotonic() > deadline + 30:
            break
    t_end = time.monotonic() - t0
    sample(t0)  # the end of the load: every connection still open
    release.set()
    for t in threads:
        t.join(30)
    time.sleep(1.0)
    sample(t0)  # the connections closed
    total = n * calls
    warm = next((x for x in series if x[1] >= LOAD_WARMUP * total), None)
    loaded_series = series[:-1]
    res.sent = '%d calls/%d conn' % (counts['calls'], n)
    res.wrong = counts['wrong']
    res.dropped = counts['lost'] + counts['failed']
    rate = counts['calls'] / t_end if t_end > 0 else 0.0
    res.notes.append('%d clients of %d tenants over TLS 1.3, each %d checked synchronous calls '
                     '(round trips alloc, up, down, memset, down, free of %s bytes, %s bytes in '
                     '%.0f%% of them): %d calls in %.1f s, %.0f calls/s, %d MiB copied' % (
                         n, len(tenants), calls, '/'.join(str(x) for x in LOAD_SIZES),
                         LOAD_BIG, 100 * LOAD_BIG_SHARE, counts['calls'], t_end, rate,
                         counts['bytes'] >> 20))
    res.notes.append('RSS series (seconds: calls done, server RSS MiB/threads): ' + ', '.join(
        '%.0f: %d %d/%d' % (x[0], x[1], x[2] >> 20, x[3]) for x in series))
    short = [i for i in range(n) if done_calls[i] < calls]
    if warm is None:
        res.fail.append('the load never passed its warm-up (%d%% of the calls)' % (
            100 * LOAD_WARMUP))
    else:
        after = [x for x in loaded_series if x[0] >= warm[0]]
        peak = max(after, key=lambda x: x[2])
        growth = peak[2] - warm[2]
        steady = ((loaded_series[-1][1] - warm[1]) / (loaded_series[-1][0] - warm[0])
                  if loaded_series[-1][0] > warm[0] else 0.0)
        res.notes.append('RSS after the warm-up (%d calls, %.0f s): %d MiB; peak after it %d '
                         'MiB (at %.0f s), at the end of the load %d MiB, %d MiB once the '
                         'clients closed: grew %+d MiB (bound: < %d MiB); %.0f calls/s after '
                         'the warm-up' % (warm[1], warm[0], warm[2] >> 20, peak[2] >> 20,
                                          peak[0], loaded_series[-1][2] >> 20,
                                          series[-1][2] >> 20, growth >> 20,
                                          LOAD_RSS_MAX >> 20, steady))
        if growth >= LOAD_RSS_MAX:
            res.fail.append('RSS grew %d MiB after the warm-up (bound %d MiB)' % (
                growth >> 20, LOAD_RSS_MAX >> 20))
    if counts['wrong'] or counts['lost'] or counts['failed']:
        res.fail.append('%d wrong, %d lost replies, %d failed clients (first: %s)' % (
            counts['wrong'], counts['lost'], counts['failed'], problems[0]))
    elif short:
        res.fail.append('%d clients did not finish their %d calls within the time limit '
                        '(fewest: %d)' % (len(short), calls, min(done_calls)))


# --- 13. TLS handshakes that never finish ----------------------------------------------------

def hs_limits(ctx):
    """class 13's server: (--max-connections, connections opened in its first phase)"""
    return ctx.q(HS_MAX_CONN_QUICK, HS_MAX_CONN), ctx.q(HS_FLOOD_QUICK, HS_FLOOD)


def hs_server_options(ctx):
    return ['--hello-timeout', str(HS_HELLO_TIMEOUT), '--max-per-address', str(HS_PER_ADDRESS),
            '--max-connections', str(hs_limits(ctx)[0])]


def client_hello():
    """The first flight of a real TLS 1.3 client (Python's, trusting the run's CA): one
    ClientHello record, fresh random and key share."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = TLS.wrap_bio(inc, out, server_hostname='127.0.0.1')
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


class Stall:
    """One connection that never finishes its TLS handshake (or, kind no-hello, finishes it
    and never says hello): silent (bare TCP, the idle connection of class 6), partial (part
    of a ClientHello, then nothing), drip (a ClientHello a byte every 100 ms), stalled (the
    whole ClientHello; the server's answer read, the client's Finished never sent)."""

    def __init__(self, addr, kind, source, rng):
        self.kind, self.source = kind, source
        self.closed = None     # seconds from opened to the server's close
        self.sent = 0
        self.got = 0           # bytes from the server (its handshake messages)
        self.error = None
        hello = client_hello() if kind in ('partial', 'drip', 'stalled') else b''
        self.hello = hello[:rng.randrange(1, len(hello))] if kind == 'partial' else hello
        self.opened = time.monotonic()
        try:
            self.sock = connect(addr, 5, source, plain=kind != 'no-hello')
        except OSError as e:  # refused before or in the handshake
            self.sock, self.closed, self.error = None, time.monotonic() - self.opened, e
            return
        self.sock.setblocking(False)
        if kind in ('partial', 'stalled'):
            self.send(len(self.hello))

    def send(self, k):
        try:
            self.sent += self.sock.send(self.hello[self.sent:self.sent + k])
        except (BlockingIOError, ssl.SSLWantWriteError):
            pass
        except OSError:
            self.close_seen()

    def close_seen(self):
        if self.closed is None:
            self.closed = time.monotonic() - self.opened
        try:
            self.sock.close()
        except OSError:
            pass

    def readable(self):
        """Reads what the server sent; records its close."""
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    self.close_seen()
                    return
                self.got += len(data)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError:
            self.close_seen()


def hold_stalls(stalls, seconds, on_tick=None):
    """Keeps the stalls' connections (dripping where they drip) until the server closed each,
    or for at most seconds; on_tick() every 50 ms or so."""
    p = select.poll()
    live = {}
    for st in stalls:
        if st.closed is None:
            p.register(st.sock.fileno(), select.POLLIN)
            live[st.sock.fileno()] = st
    end = time.monotonic() + seconds
    next_drip = time.monotonic()
    while live and time.monotonic() < end:
        if time.monotonic() >= next_drip:
            next_drip += 0.1
            for st in list(live.values()):
                if st.kind == 'drip' and st.sent < len(st.hello):
                    st.send(1)
        for fd, _ in p.poll(50):
            st = live.get(fd)
            if st is not None:
                st.readable()
        for fd, st in list(live.items()):
            if st.closed is not None:
                p.unregister(fd)
                del live[fd]
        if on_tick:
            on_tick()
    return len(live)


def refusal_counts(ctx):
    """cuda_remote_connections_refused_total by reason."""
    return {dict(labels).get('reason'): v for (name, labels), v in ctx.target.metrics_values()
            .items() if name == 'cuda_remote_connections_refused_total'}


def class_tls_stall(ctx, res):
    max_conn, flood = hs_limits(ctx)
    rng = random.Random(ctx.args.seed * 1000 + 13)
    tick = HS_HELLO_TIMEOUT / 4
    drop_by = HS_HELLO_TIMEOUT + tick + HS_DROP_SLACK
    early = HS_HELLO_TIMEOUT / 2  # closed before this: refused at accept
    shaking = ('partial', 'drip', 'stalled')
    log0 = len(ctx.target.log_text().splitlines())
    ref0 = refusal_counts(ctx)
    st0 = proc_stats(ctx.target.child) or (0, 0, 0)
    peak = list(st0)  # the class's
    now_peak = [0]    # the phase's RSS

    def watch():
        st = proc_stats(ctx.target.child)
        if st:
            for k in range(3):
                peak[k] = max(peak[k], st[k])
            now_peak[0] = max(now_peak[0], st[0])

    def gauge():
        try:
            return int(ctx.target.metrics_values().get(('cuda_remote_connections_open', ()), -1))
        except OSError:
            return -1

    def probe(timeout):
        try:
            return real_client(ctx.target.tcp, ctx.token('gamma'), timeout=timeout)
        except WrongReply as e:
            res.wrong += 1
            return 'wrong: %s' % e
        except Exception as e:
            return '%s: %s' % (type(e).__name__, e)

    phases = []  # (label, connections the server held at the height, its RSS peak)

    # phase 1: two addresses filled to --max-per-address and past it, one with handshakes
    # that never finish, one with idle connections; then connections of every kind from
    # other addresses; a real TLS client from 127.0.0.1 meanwhile
    plan = []  # (source, kind, past the address's limit)
    for k in range(HS_PER_ADDRESS + HS_EXTRA):
        plan.append(('127.0.0.2', shaking[k % 3], k >= HS_PER_ADDRESS))
    for k in range(HS_PER_ADDRESS + HS_EXTRA):
        plan.append(('127.0.0.3', 'silent', k >= HS_PER_ADDRESS))
    k = 0
    while len(plan) < flood:
        plan.append(('127.0.0.%d' % (4 + k // 48), HS_KINDS[k % len(HS_KINDS)], False))
        k += 1
    probes, slow = [], []
    stop = threading.Event()

    def prober():
        while not stop.is_set():
            took = probe(REAL_CLIENT_MAX_S + 3)
            probes.append(took)
            if not isinstance(took, float) or took > REAL_CLIENT_MAX_S:
                slow.append(took if isinstance(took, str) else '%.2f s' % took)
            stop.wait(0.5)

    probe_thread = threading.Thread(target=prober)
    probe_thread.start()
    now_peak[0] = st0[0]
    t0 = time.monotonic()
    stalls = [Stall(ctx.target.tcp, kind, src, rng) for src, kind, _ in plan]
    opened_in = time.monotonic() - t0
    held = gauge()
    left = hold_stalls(stalls, drop_by + 2, watch)
    stop.set()
    probe_thread.join(10)
    phases.append(('phase 1', held, now_peak[0]))
    ref1 = refusal_counts(ctx)

    # phase 2, again and again: every connection the server allows and some past it,
    # handshakes that never finish from addresses each under its own limit; a real client
    # while it is full (refused, as --max-connections says), and how soon once the deadline
    # emptied it; until a fill costs the server no more memory than the one before (the
    # first ones do: the allocator's free lists settle), or HS_FILLS of them
    rounds = []
    for rnd in range(ctx.q(HS_FILLS_QUICK, HS_FILLS)):
        now_peak[0] = 0
        watch()
        t1 = time.monotonic()
        group = [Stall(ctx.target.tcp, shaking[k % 3], '127.0.%d.%d' % (1 + rnd, 1 + k // 48),
                       rng) for k in range(max_conn + HS_EXTRA)]
        filled_in = time.monotonic() - t1
        held = gauge()
        full_probe = probe(3)
        served = [None]

        def serve_again():
            if served[0] is None and time.monotonic() - t1 > 0.5:
                took = probe(2)
                if isinstance(took, float):
                    served[0] = time.monotonic() - (t1 + filled_in)
                elif took.startswith('wrong'):
                    slow.append(took)
            watch()

        left += hold_stalls(group, drop_by + 2, serve_again)
        deadline = time.monotonic() + drop_by
        while served[0] is None and time.monotonic() < deadline:
            serve_again()
            time.sleep(0.1)
        phases.append(('fill %d' % (rnd + 1), held, now_peak[0]))
        rounds.append((group, filled_in, full_probe, served[0]))
        if rnd and phases[-1][2] - phases[-2][2] < HS_REFILL_RSS_MAX:
            break
    for st in stalls + [s for r in rounds for s in r[0]]:
        if st.sock is not None and st.closed is None:
            st.sock.close()
    ref2 = refusal_counts(ctx)
    time.sleep(1.0)
    st1 = proc_stats(ctx.target.child) or (0, 0, 0)
    watch()

    # what happened to each connection
    def tally(group):
        refused = [s for s in group if s.closed is not None and s.closed < early]
        dropped = [s for s in group if s.closed is not None and s.closed >= early]
        late = [s for s in dropped if s.closed > drop_by]
        still = [s for s in group if s.closed is None]
        return refused, dropped, late, still

    def delta(a, b, reason):
        return int(b.get(reason, 0) - a.get(reason, 0))

    phase2 = [s for r in rounds for s in r[0]]
    by_kind = {}
    for st in stalls + phase2:
        if st.closed is not None and st.closed >= early:
            by_kind.setdefault(st.kind, []).append(st.closed)
    over_a = [s for (src, kind, past), s in zip(plan, stalls) if past and src == '127.0.0.2']
    over_b = [s for (src, kind, past), s in zip(plan, stalls) if past and src == '127.0.0.3']
    under = [s for (src, kind, past), s in zip(plan, stalls) if not past]
    ra = tally(over_a)[0]
    rb = tally(over_b)[0]
    r_under, d1, late1, still1 = tally(under)
    r2, d2, late2, still2 = tally(phase2)
    per_addr = delta(ref0, ref1, 'per_address')
    too_many = delta(ref1, ref2, 'too_many_connections')
    timeouts = delta(ref0, ref2, 'hello_timeout')
    tls_failed = delta(ref0, ref2, 'tls_failed')
    lines = ctx.target.log_text().splitlines()[log0:]
    drop_lines = [l for l in lines if 'dropped: it sent no hello in time' in l]
    drop_logged = len(drop_lines) + sum(int(m) for l in drop_lines
                                        for m in re.findall(r'\(and (\d+) more since', l))
    res.sent = '%d+%d conn' % (len(stalls), len(phase2))
    res.dropped = len(ra) + len(rb) + len(r_under) + len(d1) + len(r2) + len(d2)
    kinds = ', '.join('%s %d (%.1f-%.1f s)' % (k, len(v), min(v), max(v))
                      for k, v in sorted(by_kind.items()))
    most = max(p[1] for p in phases)
    growth = max(p[2] for p in phases) - st0[0]
    rss_bound = HS_RSS_BASE + HS_RSS_PER_CONN * most
    res.notes.append('server: --hello-timeout %d --max-per-address %d --max-connections %d; '
                     'phase 1: %d connections opened in %.1f s (127.0.0.2: %d handshakes that '
                     'never finish + %d past the limit; 127.0.0.3: %d idle + %d past it; the '
                     'rest of every kind from 127.0.0.4 on, 48 an address); phase 2, %d fills '
                     'of the server: %d handshakes that never finish (48 an address) opened in '
                     '%s s' % (
                         HS_HELLO_TIMEOUT, HS_PER_ADDRESS, max_conn, len(stalls), opened_in,
                         HS_PER_ADDRESS, HS_EXTRA, HS_PER_ADDRESS, HS_EXTRA, len(rounds),
                         max_conn + HS_EXTRA, '/'.join('%.1f' % r[1] for r in rounds)))
    res.notes.append('past --max-per-address: %d/%d handshaking and %d/%d idle refused at once; '
                     'metric per_address +%d' % (len(ra), len(over_a), len(rb), len(over_b),
                                                 per_addr))
    res.notes.append('past --max-connections: %d of %d refused at once (metric '
                     'too_many_connections +%d, with the real clients tried while full); a '
                     'real TLS client while full: %s; served again %s after the fill' % (
                         len(r2), len(phase2), too_many,
                         ' / '.join(r[2] if isinstance(r[2], str) else 'served in %.2f s' % r[2]
                                    for r in rounds),
                         ' / '.join('%.2f s' % r[3] if r[3] is not None else 'never'
                                    for r in rounds)))
    res.notes.append('dropped at the hello deadline, by kind (seconds after connecting): %s; '
                     'metric hello_timeout +%d, tls_failed +%d; the log says %d of them (%d '
                     'lines, rate-limited), e.g. "%s"' % (
                         kinds or 'none', timeouts, tls_failed, drop_logged, len(drop_lines),
                         drop_lines[0].split('warning: ', 1)[-1] if drop_lines else '-'))
    flights = [s.got for s in stalls + phase2 if s.kind == 'stalled' and s.closed is not None
               and s.closed >= early]
    res.notes.append('the stalled ones read the server\'s answer to their ClientHello (%s bytes) '
                     'and never sent their Finished; real TLS client during phase 1: %d probes, '
                     '%s' % ('%d-%d' % (min(flights), max(flights)) if flights else 'no',
                             len(probes),
                             'max %.2f s' % max(p for p in probes if isinstance(p, float))
                             if any(isinstance(p, float) for p in probes) else '-'))
    res.notes.append('server RSS %d MiB before; %s: grew %d MiB (%.0f KiB a connection held; '
                     'bound %d MiB + %d KiB a connection = %d MiB); threads %d -> %d; fds %d -> '
                     '%d -> %d' % (
                         st0[0] >> 20, '; '.join('%s: %d connections open, RSS peak %d MiB' % (
                             p[0], p[1], p[2] >> 20) for p in phases), growth >> 20,
                         growth / max(1, most) / KiB, HS_RSS_BASE >> 20, HS_RSS_PER_CONN // KiB,
                         rss_bound >> 20, st0[1], peak[1], st0[2], peak[2], st1[2]))
    if r_under:
        res.notes.append('%d connections under every limit closed within %.0f s (%s)' % (
            len(r_under), early, ', '.join(sorted({s.kind for s in r_under}))))
    accepted = d1 + d2
    if len(ra) != len(over_a) or len(rb) != len(over_b):
        res.fail.append('past --max-per-address: %d/%d handshaking, %d/%d idle refused' % (
            len(ra), len(over_a), len(rb), len(over_b)))
    if per_addr != len(ra) + len(rb):
        res.fail.append('metric per_address +%d, %d refusals expected' % (
            per_addr, len(ra) + len(rb)))
    if len(r2) < len(rounds) * HS_EXTRA or too_many < len(rounds) * HS_EXTRA:
        res.fail.append('past --max-connections: %d refused seen, metric +%d (at least %d '
                        'expected)' % (len(r2), too_many, len(rounds) * HS_EXTRA))
    if late1 or late2 or still1 or still2 or left:
        res.fail.append('%d connections dropped later than %.1f s, %d never (hello timeout '
                        '%d s)' % (len(late1) + len(late2), drop_by,
                                   len(still1) + len(still2), HS_HELLO_TIMEOUT))
    if timeouts < len(accepted):
        res.fail.append('metric hello_timeout +%d for %d connections dropped' % (
            timeouts, len(accepted)))
    if not drop_lines:
        res.fail.append('no "dropped: it sent no hello in time" in the server log')
    if slow:
        res.fail.append('real TLS client not served within %.0f s: %s' % (
            REAL_CLIENT_MAX_S, slow[0]))
    if not probes:
        res.fail.append('no real TLS client served during phase 1')
    if any(r[3] is None for r in rounds):
        res.fail.append('no real client served within %.1f s once phase 2 had filled the '
                        'server' % drop_by)
    if growth >= rss_bound:
        res.fail.append('RSS grew %d MiB with %d connections held (bound %d MiB)' % (
            growth >> 20, most, rss_bound >> 20))
    if phases[-1][2] - phases[-2][2] >= HS_REFILL_RSS_MAX:
        res.fail.append('fill %d of the server still grew its RSS peak by %d MiB (bound %d '
                        'MiB)' % (len(rounds), (phases[-1][2] - phases[-2][2]) >> 20,
                                  HS_REFILL_RSS_MAX >> 20))
    if peak[1] - st0[1] >= IDLE_THREADS_MAX:
        res.fail.append('threads grew by %d (limit %d)' % (peak[1] - st0[1], IDLE_THREADS_MAX))

# --- the run --------------------------------------------------------------------------------

CLASSES = [
    (1, 'random frames', class_random),
    (2, 'mutated bodies', class_mutated),
    (3, 'absurd lengths', class_lengths),
    (4, 'truncated+drip', class_drip),
    (5, 'pre-auth bulk', class_preauth),
    (6, 'idle flood', class_idle),
    (7, 'non-reading client', class_nonreader),
    (8, 'over-read launch', class_overread),
    (9, 'many clients', class_many),
    (10, 'SIGKILLed clients', class_sigkill),
    (11, 'server SIGKILLed', class_server_kill),
    (12, 'TLS load', class_tls_load),
    (13, 'TLS never finished', class_tls_stall),
]
NEEDS_TLS = {12, 13}  # run with --tls only


def class_server_options(ctx, num):
    """Server options a class needs beyond the usual ones (its server is started for it)."""
    return hs_server_options(ctx) if num == 13 else []


def sanitizer_reports(text):
    return sum(text.count(s) for s in run.SANITIZER_REPORTS)


def run_class(ctx, num, name, fn, workdir, fresh):
    res = Result(num, name)
    want = class_server_options(ctx, num)
    old = ctx.target
    if old is None or not old.alive() or old.options != want:
        if old is not None:
            old.stop()
            res.notes.append('a fresh cuda-remoted was started for this class (%s)' % (
                'the previous one had exited' if not old.alive() and old.options == want
                else 'with %s' % ' '.join(want) if want else 'with the usual options'))
        elif want:
            res.notes.append('its cuda-remoted has %s' % ' '.join(want))
        d = os.path.join(workdir, 'server-%d' % fresh[0])
        fresh[0] += 1
        os.makedirs(d)
        ctx.target = Target(ctx.args.server, d, ctx.pki[1:] if ctx.pki else None, want)
        ctx.monitor.set_target(ctx.target)
        ctx.canary.target = ctx.target
        if not ctx.canary.is_alive():
            ctx.canary.start()
    ctx.monitor.sample()
    ctx.monitor.reset_peak()
    res.before = proc_stats(ctx.target.child)
    ctx.canary.cls = num
    ev0 = len(ctx.monitor.events)
    san0 = sanitizer_reports(ctx.target.log_text())
    log0 = len(ctx.target.log_text().splitlines())
    t0 = time.monotonic()
    try:
        fn(ctx, res)
    except Exception as e:
        res.fail.append('the class stopped: %s: %s' % (type(e).__name__, e))
        res.notes.append(traceback.format_exc().strip().splitlines()[-1])
        traceback.print_exc()
    time.sleep(1.0)  # what the server holds once the class is over
    ctx.monitor.sample()
    res.seconds = time.monotonic() - t0
    res.after = proc_stats(ctx.target.child)
    res.peak = ctx.monitor.peak
    ctx.canary.cls = None
    with ctx.canary.lock:
        res.canary = list(ctx.canary.stats.get(num, [0, 0, 0, 0.0, None]))
    for when, kind, detail, expected in ctx.monitor.events[ev0:]:
        if kind in ('server-death', 'supervisor-exit') and not expected:
            res.crashes += 1
            res.notes.append('unexpected: %s' % detail)
        if kind == 'server-start':
            res.restarts += 1
    # what the supervisor said about it (its wording differs between versions)
    said = [l for l in ctx.target.log_text().splitlines()[log0:]
            if re.search(r'server process (crashed|died|ended)', l)]
    if res.crashes and said:
        res.notes.append('the log says: %s' % said[-1].split('cuda-remoted: ', 1)[-1])
    if res.crashes:
        res.fail.append('%d server process death(s) not caused by the script' % res.crashes)
    if sanitizer_reports(ctx.target.log_text()) > san0:
        res.fail.append('a sanitizer report in the server log')
    ok, wrong, failed, slowest, problem = res.canary
    if wrong:
        res.fail.append('canary: %d wrong replies (%s)' % (wrong, problem))
    if failed and num != 11:  # in class 11 the canary's session dies with the server
        res.fail.append('canary: %d failed calls (%s)' % (failed, problem))
    return res


def mib(st, i=0):
    return '-' if not st else str(st[i] >> 20) if i == 0 else str(st[i])


def print_table(results, out=sys.stdout):
    cols = ['#', 'class', 'sent', 'crash', 'restart', 'RSS MiB b/peak/a', 'threads b/peak/a',
            'refused/dropped', 'wrong', 'canary ok/wrong/fail', 'verdict']
    rows = []
    for r in results:
        rows.append([str(r.num), r.name, r.sent, str(r.crashes), str(r.restarts),
                     '%s/%s/%s' % (mib(r.before), mib(r.peak), mib(r.after)),
                     '%s/%s/%s' % (mib(r.before, 1), mib(r.peak, 1), mib(r.after, 1)),
                     str(r.dropped), str(r.wrong),
                     '%d/%d/%d' % tuple(r.canary[:3]),
                     r.verdict + ('' if not r.fail else ': ' + r.fail[0])])
    tot = [0, 0, 0, 0, 0, 0, 0]
    for r in results:
        for i, v in enumerate((r.crashes, r.restarts, r.dropped, r.wrong, *r.canary[:3])):
            tot[i] += v
    fails = sum(1 for r in results if r.fail)
    rows.append(['', 'TOTAL', '', str(tot[0]), str(tot[1]), '', '', str(tot[2]), str(tot[3]),
                 '%d/%d/%d' % tuple(tot[4:7]),
                 '%d FAIL, %d ok' % (fails, len(results) - fails)])
    widths = [max(len(c), *(len(row[i]) for row in rows)) if i < len(cols) - 1 else len(c)
              for i, c in enumerate(cols)]
    line = lambda row: '  '.join(v.ljust(w) for v, w in zip(row, widths)).rstrip()
    print(line(cols), file=out)
    print(line(['-' * w for w in widths]), file=out)
    for row in rows[:-1]:
        print(line(row), file=out)
    print(line(['-' * w for w in widths]), file=out)
    print(line(rows[-1]), file=out)
    print(file=out)
    for r in results:
        print('%2d %s (%.0f s): %s' % (r.num, r.name, r.seconds, r.verdict), file=out)
        for f in r.fail:
            print('     FAIL: %s' % f, file=out)
        for n in r.notes:
            print('     %s' % n, file=out)
        c = r.canary
        print('     canary: %d checked round trips, %d wrong, %d failed, slowest %.2f s%s' % (
            c[0], c[1], c[2], c[3], '' if not c[4] else ' (first problem: %s)' % c[4]),
            file=out)
    out.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split('\n', 2)[2])
    ap.add_argument('--server', default=os.path.join(ROOT, 'build', 'server', 'cuda-remoted'))
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--only')
    ap.add_argument('--keep-log')
    ap.add_argument('--tls', action='store_true')
    ap.add_argument('--load-calls', type=int)
    ap.add_argument('--child', help=argparse.SUPPRESS)
    ap.add_argument('--child-addr', help=argparse.SUPPRESS)
    ap.add_argument('--child-token', help=argparse.SUPPRESS)
    ap.add_argument('--child-ca', help=argparse.SUPPRESS)
    args = ap.parse_args()
    global TLS
    if args.child:
        if args.child_ca:
            TLS = tls_context(args.child_ca)
        try:
            return child_main(args.child, args.child_addr, args.child_token)
        except (OSError, ConnectionError, WrongReply):
            return 1
    if not os.access(args.server, os.X_OK):
        print('attack.py: no server at %s (build it first, or --server BIN)' % args.server,
              file=sys.stderr)
        return 2
    only = None
    if args.only:
        try:
            only = {int(x) for x in args.only.split(',')}
        except ValueError:
            ap.error('--only: numbers, comma-separated')
    limit = 240 if args.quick else 600
    if args.tls:  # and classes 12 and 13
        limit += (LOAD_SECONDS_QUICK if args.quick else LOAD_SECONDS) + 90
    ctx = Ctx(args)
    results = []
    workdir = tempfile.mkdtemp(prefix='cr-attack-')
    if args.tls:
        try:
            ctx.pki = make_pki(os.path.join(workdir, 'pki'))
        except run.Failure as e:
            print('attack.py: cannot make the test certificates: %s' % e, file=sys.stderr)
            shutil.rmtree(workdir, ignore_errors=True)
            return 2
        TLS = tls_context(ctx.pki[0])
    started = time.monotonic()
    finished = threading.Event()

    def cleanup():
        ctx.canary.halt.set()
        ctx.monitor.halt.set()
        for p in ctx.children:
            if p.poll() is None:
                p.kill()
                p.wait()
        if ctx.target:
            ctx.target.stop()

    def watchdog():
        if finished.wait(limit):
            return
        print('attack.py: the run passed its time limit of %d s: stopping' % limit,
              file=sys.stderr)
        print_table(results, sys.stderr)
        cleanup()
        print('server log: %s' % workdir, file=sys.stderr)
        os._exit(2)

    threading.Thread(target=watchdog, daemon=True).start()
    ctx.monitor.start()
    fresh = [0]
    print('attack.py: %s run, seed %d, server %s, TCP %s' % (
        'quick' if args.quick else 'full', args.seed, args.server,
        'over TLS 1.3 (Unix sockets in plaintext)' if args.tls else 'in plaintext'),
        flush=True)
    try:
        for num, name, fn in CLASSES:
            if only and num not in only:
                continue
            if num in NEEDS_TLS and not args.tls:
                print('attack.py: class %d (%s): not run (needs --tls)' % (num, name),
                      flush=True)
                continue
            print('attack.py: class %d (%s)...' % (num, name), flush=True)
            res = run_class(ctx, num, name, fn, workdir, fresh)
            results.append(res)
            print('attack.py: class %d: %s%s (%.0f s)' % (
                num, res.verdict, '' if not res.fail else ': ' + '; '.join(res.fail),
                res.seconds), flush=True)
    finally:
        finished.set()
        cleanup()
    print()
    print('cuda-remoted attack run (%s, seed %d, %.0f s, emulated device, %s device memory, '
          'TCP %s)' % ('quick' if args.quick else 'full', args.seed, time.monotonic() - started,
                       EMU_MEMORY, 'over TLS 1.3' if args.tls else 'in plaintext'))
    print_table(results)
    failed = any(r.fail for r in results)
    if args.keep_log:
        os.makedirs(args.keep_log, exist_ok=True)
        for i in range(fresh[0]):
            src = os.path.join(workdir, 'server-%d' % i, 'server.log')
            if os.path.exists(src):
                shutil.copy(src, os.path.join(args.keep_log, 'server-%d.log' % i))
        print('server logs copied to %s' % args.keep_log)
    if failed and not args.keep_log:
        print('server logs kept in %s' % workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
