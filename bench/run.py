#!/usr/bin/env python3
"""Runs the benchmarks: each remoting figure beside the machine's limit for the same
transport, measured in the same run, as a ratio; median of several rounds with min-max.

  bench/run.py --build DIR [--rounds N] [--transports tcp,tls,unix,shm] [--quick]
               [--copy-sizes 1M,64M] [--output FILE] [--backend emu|cuda]

Every round measures the limits (bench/raw_limits.c) and then the remoting layer
(bench/remote_bench.c through the stub, against a fresh cuda-remoted on the emulated
device, where the device side costs nearly nothing, or with --backend cuda on a GPU through
NVIDIA's driver), one transport after the other:
  tcp   loopback TCP
  tls   loopback TCP with TLS 1.3: a server with a certificate of a CA made for the run (the
        openssl command, in the run's temporary folder), the client at tls://127.0.0.1:PORT
        trusting that CA. Its figures are compared with plaintext TCP's of the same round
        (per-round ratios, so tcp runs too, just before it), and with the limits of TLS on
        this machine for the ciphersuite the server reports it negotiated: raw_limits over
        TLS with that suite, and one core's rate of its AEAD on 16 KiB records
        (`openssl speed -evp CIPHER -bytes 16384`, encrypting and decrypting). Both tcp and
        tls also run the 1 MiB and 64 MiB copies alone once more (remote_bench --quick
        --copies-only), for the CPU time client and server spend per byte copied: where the
        cores are all busy, throughput follows that cost
  unix  a Unix socket, shared memory off (CUDA_REMOTE_SHM=0): every byte on the socket
  shm   a Unix socket with shared memory: messages on the socket, bytes in shared memory;
        its copies are compared with memcpy of the same size, its calls with the Unix
        socket's limits
and then kernel execution (bench/kernels_bench.cu, nvcc-built, through the stub over a Unix
socket): a 1 M-element vector add and a 256x256 tiled matrix multiply on the emulated
device's PTX interpreter, beside the same computation as a host loop (the ratio is the
slowdown). --no-kernels leaves it out.

Last, tenant priority (tests/tenants/spin.cu, over a Unix socket, against a server with a
tenants file): the launch-and-wait round trip of 100 us kernels of a `high` tenant alone,
and while a `low` tenant keeps the device busy with 2 ms kernels; for comparison, the same
for a `normal` tenant under another `normal` one, which shares by time slices instead.
--no-priority leaves it out.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BACKEND = 'emu'  # the servers' backend (--backend)


def run_json_lines(cmd, env=None, timeout=900):
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit('bench: %s failed (%d):\n%s' % (' '.join(cmd), out.returncode, out.stderr))
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith('{')]


def start_server(build, transport, workdir, extra, log_level='info'):
    on_unix = transport in ('unix', 'shm')
    listen = 'unix:' + os.path.join(workdir, 'bench.sock') if on_unix else '127.0.0.1:0'
    log = open(os.path.join(workdir, 'server-%s.log' % transport), 'w+')
    proc = subprocess.Popen([os.path.join(build, 'server', 'cuda-remoted'), '--backend', BACKEND,
                             '--emu-memory', '2GiB', '--listen', listen] + extra,
                            stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, CUDA_REMOTE_LOG=log_level))
    deadline = time.time() + 15
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r'listening on (\S+)', log.read())
        if m:
            return proc, listen if on_unix else m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    sys.exit('bench: the server did not start:\n' + log.read())


def server_log(workdir, transport):
    with open(os.path.join(workdir, 'server-%s.log' % transport)) as f:
        return f.read()


# --- TLS ---------------------------------------------------------------------------------------

def openssl(*argv, cwd):
    p = subprocess.run(['openssl'] + list(argv), cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit('bench: openssl %s failed:\n%s' % (' '.join(argv), p.stdout))


def make_pki(d):
    """A CA (ca.pem) and a certificate for 127.0.0.1 it signed (server.pem, server.key), in d,
    as tests/tls makes them: ECDSA P-256."""
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
            '-days', '30', '-subj', '/CN=cuda-remote bench CA', '-keyout', 'ca.key', '-out',
            'ca.pem', cwd=d)
    openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
            '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
            '-keyout', 'server.key', '-out', 'server.csr', cwd=d)
    openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key',
            '-CAcreateserial', '-days', '30', '-copy_extensions', 'copy', '-out', 'server.pem',
            cwd=d)
    return {'ca': os.path.join(d, 'ca.pem'), 'cert': os.path.join(d, 'server.pem'),
            'key': os.path.join(d, 'server.key')}


# TLS 1.3 ciphersuites and the `openssl speed -evp` name of their AEAD
SUITE_EVP = {'TLS_AES_128_GCM_SHA256': 'aes-128-gcm', 'TLS_AES_256_GCM_SHA384': 'aes-256-gcm',
             'TLS_CHACHA20_POLY1305_SHA256': 'chacha20-poly1305'}


def negotiated_suite(log):
    """The ciphersuite of the session in a server log at --log debug."""
    m = re.search(r'session \d+: TLSv1\.3 (\S+) from', log)
    if not m:
        sys.exit('bench: the TLS server did not log a TLS 1.3 session:\n' + log)
    return m.group(1)


def aead_speed(evp, seconds, decrypt):
    """One core's rate (GB/s) of `openssl speed -evp evp` on 16 KiB records."""
    cmd = ['openssl', 'speed'] + (['-decrypt'] if decrypt else []) + [
        '-evp', evp, '-bytes', '16384', '-seconds', str(seconds)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=120)
    m = re.search(r'^\S+\s+([0-9.]+)k\s*$', out.stdout, re.M)
    if out.returncode != 0 or not m:
        sys.exit('bench: %s failed:\n%s%s' % (' '.join(cmd), out.stdout, out.stderr))
    return float(m.group(1)) * 1e3 / 1e9  # 1000s of bytes per second


PRIORITY_TENANTS = [('high', 'high'), ('low', 'low'), ('normal', 'normal'), ('rival', 'normal')]


def priority_latency(build, add):
    """Round trips of a high tenant alone, under a saturating low tenant and under a low
    tenant's training loop (batches of 8 kernels, then a synchronize), and of a normal
    tenant under a normal one."""
    spin = os.path.join(build, 'tests', 'tenants', 'spin')
    with tempfile.TemporaryDirectory(prefix='cr-bench-') as workdir:
        tenants = os.path.join(workdir, 'tenants.json')
        with open(tenants, 'w') as f:
            json.dump({'tenants': [{'name': n, 'token': n + '-bench-token', 'priority': p}
                                   for n, p in PRIORITY_TENANTS]}, f)
        proc, address = start_server(build, 'unix', workdir, ['--tenants', tenants])
        try:
            def env(name):
                return dict(os.environ, CUDA_REMOTE_ADDR=address,
                            CUDA_REMOTE_TOKEN=name + '-bench-token',
                            LD_LIBRARY_PATH=':'.join(p for p in (
                                os.path.join(build, 'client'),
                                os.environ.get('LD_LIBRARY_PATH')) if p))

            def latency(name):
                out = subprocess.run([spin, 'latency', '300', '100'], env=env(name),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, timeout=300)
                m = re.search(r'LATENCY_US (\S+) (\S+) (\S+)', out.stdout)
                if out.returncode != 0 or not m:
                    sys.exit('bench: spin latency failed:\n' + out.stderr)
                return float(m.group(1)), float(m.group(2)), float(m.group(3))

            loads = {'saturate': ['saturate', '600', '2000'], 'loop': ['loop', '600', '2000', '8']}
            for who, load, how, mode in (
                    ('high', None, None, 'high_alone'),
                    ('high', 'low', 'saturate', 'high_under_low'),
                    ('high', 'low', 'loop', 'high_under_low_loop'),
                    ('normal', None, None, 'normal_alone'),
                    ('normal', 'rival', 'saturate', 'normal_under_normal')):
                busy = None
                if load:
                    busy = subprocess.Popen([spin] + loads[how], env=env(load),
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(1)  # it has the device
                try:
                    p50, p90, p99 = latency(who)
                finally:
                    if busy:
                        busy.kill()
                        busy.wait()
                for name, value in (('p50', p50), ('p90', p90), ('p99', p99)):
                    add({'metric': 'launch_wait_us', 'mode': mode + '_' + name, 'value': value},
                        BACKEND)
        finally:
            proc.terminate()
            proc.wait()


def key(r):
    return (r.get('transport', ''), r['metric'], r.get('mode', ''), r.get('size', 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--transports', default='tcp,tls,unix,shm')
    ap.add_argument('--quick', action='store_true', help='fewer iterations (a smoke run)')
    ap.add_argument('--copy-sizes', help='the sizes of the copies remote_bench times, e.g. '
                    '1M,64M (default: 4 KiB to 256 MiB)')
    ap.add_argument('--output', help='machine-readable results (JSON)')
    ap.add_argument('--no-kernels', action='store_true', help='skip kernel execution speed')
    ap.add_argument('--no-priority', action='store_true',
                    help='skip the latency of a high-priority tenant under load')
    ap.add_argument('--backend', default='emu', choices=('emu', 'cuda'),
                    help='the servers\' device: emulated (default) or a GPU through NVIDIA\'s '
                    'driver')
    ap.add_argument('--server-arg', action='append', default=[],
                    help='an extra argument for cuda-remoted')
    args = ap.parse_args()
    global BACKEND
    BACKEND = args.backend
    build = os.path.abspath(args.build)
    transports = [t for t in args.transports.split(',') if t]  # '' for none
    if 'tls' in transports:  # compared with plaintext TCP of the same round, run just before
        transports = [t for t in transports if t != 'tls']
        if 'tcp' not in transports:
            transports.insert(0, 'tcp')
        transports.insert(transports.index('tcp') + 1, 'tls')
    samples = {}
    suites = set()  # the ciphersuites TLS sessions negotiated
    pki_dir = tempfile.TemporaryDirectory(prefix='cr-bench-pki-')
    pki = make_pki(pki_dir.name) if 'tls' in transports else None

    def add(record, transport=None):
        if transport:
            record['transport'] = transport
        samples.setdefault(key(record), []).append(record['value'])

    for rnd in range(args.rounds):
        print('round %d/%d' % (rnd + 1, args.rounds), file=sys.stderr)
        for r in run_json_lines([os.path.join(build, 'bench', 'raw_limits'), 'memcpy']):
            add(r)
        raw = [t for t in transports if t != 'tls']  # TLS's once its suite is known
        if 'shm' in raw and 'unix' not in raw:
            raw.append('unix')  # the shared-memory path's messages use the Unix socket
        for t in raw:
            for r in run_json_lines([os.path.join(build, 'bench', 'raw_limits'), t]):
                add(r)
        for t in transports:
            with tempfile.TemporaryDirectory(prefix='cr-bench-') as workdir:
                extra = ['--tls-cert', pki['cert'], '--tls-key', pki['key']] if t == 'tls' else []
                proc, address = start_server(build, t, workdir, args.server_arg + extra,
                                             'debug' if t == 'tls' else 'info')
                try:
                    env = dict(os.environ, CUDA_REMOTE_ADDR=address,
                               CUDA_REMOTE_SHM='1' if t == 'shm' else '0')
                    if t == 'tls':
                        env.update(CUDA_REMOTE_ADDR='tls://' + address,
                                   CUDA_REMOTE_TLS_CA=pki['ca'])
                        for k in ('CUDA_REMOTE_TLS_CERT', 'CUDA_REMOTE_TLS_KEY',
                                  'CUDA_REMOTE_TLS_SERVER_NAME'):
                            env.pop(k, None)
                    cmd = [os.path.join(build, 'bench', 'remote_bench')]
                    if args.quick:
                        cmd.append('--quick')
                    if args.copy_sizes:
                        cmd += ['--sizes', args.copy_sizes]
                    for r in run_json_lines(cmd, env=env):
                        add(r, t)
                finally:
                    proc.terminate()
                    proc.wait()
                if t == 'tls':
                    suite = negotiated_suite(server_log(workdir, t))
                    suites.add(suite)
                    tls_limits(build, pki, suite, 1 if args.quick else 2, add)
            if 'tls' in transports and t in ('tcp', 'tls'):
                cpu_per_byte(build, t, pki, args.server_arg, add)
        if not args.no_kernels:
            with tempfile.TemporaryDirectory(prefix='cr-bench-') as workdir:
                proc, address = start_server(build, 'unix', workdir, args.server_arg)
                try:
                    stub = os.path.join(build, 'client')  # cudart loads libcuda.so.1
                    env = dict(os.environ, CUDA_REMOTE_ADDR=address,
                               LD_LIBRARY_PATH=':'.join(
                                   p for p in (stub, os.environ.get('LD_LIBRARY_PATH')) if p))
                    cmd = [os.path.join(build, 'bench', 'kernels_bench')]
                    if args.quick:
                        cmd.append('--quick')
                    for r in run_json_lines(cmd, env=env):
                        add(r, 'emu')
                finally:
                    proc.terminate()
                    proc.wait()

        if not args.no_priority:
            priority_latency(build, add)

    def stat(k):
        v = samples.get(k)
        if not v:
            return None
        return {'median': statistics.median(v), 'min': min(v), 'max': max(v), 'n': len(v)}

    rows, results = [], []

    def row(label, transport, fig_key, limit_key, invert=False, paired=False):
        """A figure beside its limit; the ratio of the medians, or with paired (both
        measured once a round) the median [min-max] of each round's ratio."""
        fig, lim = stat(fig_key), stat(limit_key)
        if not fig or not lim:
            return
        # latency: limit/figure would be < 1 for "slower"; report figure/limit for latency
        ratio = (fig['median'] / lim['median']) if not invert else (lim['median'] /
                                                                     fig['median'])
        spread = None
        if paired and len(samples[fig_key]) == len(samples[limit_key]):
            each = [(f / l) if not invert else (l / f)
                    for f, l in zip(samples[fig_key], samples[limit_key])]
            ratio, spread = statistics.median(each), (min(each), max(each))
        rows.append((transport, label, fig, lim, ratio, spread))
        results.append({'transport': transport, 'figure': label, 'metric': fig_key[1],
                        'mode': fig_key[2], 'size': fig_key[3], 'value': fig,
                        'limit_metric': limit_key[1], 'limit': lim, 'ratio': ratio,
                        'ratio_per_round': paired})
        if spread:
            results[-1]['ratio_min_max'] = list(spread)

    for t in transports:
        if t == 'tls':
            tls_rows(samples, row)
        # shared memory: messages still go over the Unix socket, bytes are memcpy'd
        msg = 'unix' if t == 'shm' else t
        row('sync call p50 (us) vs blocking round trip', t, (t, 'sync_call_us', 'p50', 0),
            (msg, 'rtt_blocking_us', '', 0), invert=False)
        row('sync call p50 (us) vs spinning round trip', t, (t, 'sync_call_us', 'p50', 0),
            (msg, 'rtt_spin_us', '', 0), invert=False)
        row('async launches/s vs coalesced messages/s', t,
            (t, 'launch_rate_per_s', 'with_sync', 0), (msg, 'msg_rate_per_s', '', 0))
        row('100 kernels as one graph (us) vs 100 launches', t, (t, 'round_us', 'graph_100', 0),
            (t, 'round_us', 'launches_100', 0), paired=True)
        for size in sorted({k[3] for k in samples if k[0] == t and k[3]}):
            for metric in ('h2d_gbps', 'd2h_gbps'):
                for mode in ('pageable', 'pinned'):
                    if t == 'shm':
                        label, limit = 'memcpy', ('memcpy', 'memcpy_gbps', '', size)
                    else:
                        label, limit = 'raw transfer', (t, 'transfer_gbps', '', size)
                    row('%s %s %s (GB/s) vs %s of that size' % (
                        metric[:3].upper(), mode, human(size), label), t,
                        (t, metric, mode, size), limit)

    for kernel, what in (('vector_add_1m', 'vector add 1M'), ('matmul_256', 'matmul 256x256')):
        row('%s kernel (s) vs the host loop (s)' % what, 'emu', ('emu', 'kernel_s', kernel, 0),
            ('emu', 'host_s', kernel, 0))

    for q in ('p50', 'p90', 'p99'):
        row('high tenant launch+wait %s (us) under low load vs alone' % q, BACKEND,
            (BACKEND, 'launch_wait_us', 'high_under_low_' + q, 0),
            (BACKEND, 'launch_wait_us', 'high_alone_' + q, 0))
        row('high tenant launch+wait %s (us) under a low loop vs alone' % q, BACKEND,
            (BACKEND, 'launch_wait_us', 'high_under_low_loop_' + q, 0),
            (BACKEND, 'launch_wait_us', 'high_alone_' + q, 0))
        row('normal tenant launch+wait %s (us) under normal vs alone' % q, BACKEND,
            (BACKEND, 'launch_wait_us', 'normal_under_normal_' + q, 0),
            (BACKEND, 'launch_wait_us', 'normal_alone_' + q, 0))

    print('\n%-5s %-56s %12s %12s %8s' % ('path', 'figure (median [min-max])', 'value',
                                          'limit', 'ratio'))
    for t, label, fig, lim, ratio, spread in rows:
        print('%-5s %-56s %12s %12s %7.2fx%s' % (t, label, fmt(fig), fmt(lim), ratio,
                                                 ' [%.2f-%.2f]' % spread if spread else ''))
    print('\nmemcpy one core: 1 MiB %s GB/s, 64 MiB %s GB/s' % (
        fmt(stat(('memcpy', 'memcpy_1m_gbps', '', 0))),
        fmt(stat(('memcpy', 'memcpy_64m_gbps', '', 0)))))
    for t in transports:
        if t != 'shm':
            print('%s stream: 1 MiB writes %s GB/s, 64 MiB writes %s GB/s' % (
                t, fmt(stat((t, 'bulk_1m_gbps', '', 0))), fmt(stat((t, 'bulk_64m_gbps', '', 0)))))
    if 'tls' in transports:
        for suite in sorted(suites):
            evp = SUITE_EVP.get(suite, '?')
            print('TLS: %s negotiated; raw TLS round trip %s us blocking, %s us spinning; '
                  'openssl speed -evp %s, 16 KiB: encrypt %s GB/s, decrypt %s GB/s (one core)' % (
                      suite, fmt(stat(('tls', 'rtt_blocking_us', '', 0))),
                      fmt(stat(('tls', 'rtt_spin_us', '', 0))), evp,
                      fmt(stat(('tls', 'aead_encrypt_gbps', '', 0))),
                      fmt(stat(('tls', 'aead_decrypt_gbps', '', 0)))))
    if 'shm' in transports:
        print('shared-memory ring between processes: round trip %s us spinning, %s us '
              'futex; 1 MiB stream %s GB/s' % (
                  fmt(stat(('shm', 'rtt_spin_us', '', 0))),
                  fmt(stat(('shm', 'rtt_blocking_us', '', 0))),
                  fmt(stat(('shm', 'bulk_1m_gbps', '', 0)))))

    if not args.no_kernels:
        print('first launch (the PTX prepared): vector add %s s, matmul %s s' % (
            fmt(stat(('emu', 'first_launch_s', 'vector_add_1m', 0))),
            fmt(stat(('emu', 'first_launch_s', 'matmul_256', 0)))))

    if args.output:
        doc = {'date': datetime.date.today().isoformat(), 'host': platform.node(),
               'cpus': os.cpu_count(), 'rounds': args.rounds, 'quick': args.quick,
               'tls_suites': sorted(suites),
               'results': results,
               'samples': [{'key': list(k), 'values': v} for k, v in sorted(samples.items())]}
        with open(args.output, 'w') as f:
            json.dump(doc, f, indent=1)
        print('\nwrote %s' % args.output)
    pki_dir.cleanup()


def cpu_per_byte(build, transport, pki, server_arg, add):
    """The CPU time the client and the server (its processes together) spend per byte of
    1 MiB and 64 MiB copies, the copies alone (ns/B)."""
    def cpu(use):
        return use.ru_utime + use.ru_stime

    with tempfile.TemporaryDirectory(prefix='cr-bench-') as workdir:
        extra = ['--tls-cert', pki['cert'], '--tls-key', pki['key']] if transport == 'tls' else []
        proc, address = start_server(build, transport, workdir, server_arg + extra)
        try:
            env = dict(os.environ, CUDA_REMOTE_ADDR=address, CUDA_REMOTE_SHM='0')
            if transport == 'tls':
                env.update(CUDA_REMOTE_ADDR='tls://' + address, CUDA_REMOTE_TLS_CA=pki['ca'])
            before = cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
            out = subprocess.run([os.path.join(build, 'bench', 'remote_bench'), '--quick',
                                  '--copies-only', '--sizes', '1M,64M'], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 timeout=900)
            client = cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - before
            if out.returncode != 0:
                sys.exit('bench: remote_bench --copies-only failed:\n' + out.stderr)
        finally:
            proc.terminate()
            _, _, use = os.wait4(proc.pid, 0)  # the supervisor, with its server process
            proc.returncode = 0
    copied = [json.loads(l) for l in out.stdout.splitlines() if '"bytes_copied"' in l][0]
    add({'transport': transport, 'metric': 'cpu_ns_per_byte',
         'value': (client + cpu(use)) / copied['value'] * 1e9})


def tls_limits(build, pki, suite, seconds, add):
    """The limits of TLS here for the suite the remoting layer negotiated: raw_limits over TLS
    with that suite, and one core's rate of its AEAD."""
    for r in run_json_lines([os.path.join(build, 'bench', 'raw_limits'), 'tls', pki['cert'],
                             pki['key'], suite]):
        if r['metric'] == 'cipher':
            if r['name'] != suite:
                sys.exit('bench: raw_limits negotiated %s, not %s' % (r['name'], suite))
        else:
            add(r)
    evp = SUITE_EVP.get(suite)
    if not evp:
        sys.exit('bench: no openssl speed name for the ciphersuite %s' % suite)
    add({'transport': 'tls', 'metric': 'aead_encrypt_gbps', 'value': aead_speed(evp, seconds, 0)})
    add({'transport': 'tls', 'metric': 'aead_decrypt_gbps', 'value': aead_speed(evp, seconds, 1)})


def tls_rows(samples, row):
    """TLS against plaintext TCP of the same round, and against one core's AEAD rate (the
    raw TLS limits come in the rows every transport has)."""
    row('sync call p50 (us) vs plaintext TCP sync call p50', 'tls',
        ('tls', 'sync_call_us', 'p50', 0), ('tcp', 'sync_call_us', 'p50', 0), paired=True)
    row('sync call p99 (us) vs plaintext TCP sync call p99', 'tls',
        ('tls', 'sync_call_us', 'p99', 0), ('tcp', 'sync_call_us', 'p99', 0), paired=True)
    row('raw spinning round trip (us), TLS vs TCP (the limit)', 'tls',
        ('tls', 'rtt_spin_us', '', 0), ('tcp', 'rtt_spin_us', '', 0), paired=True)
    row('async launches/s vs plaintext TCP', 'tls', ('tls', 'launch_rate_per_s', 'with_sync', 0),
        ('tcp', 'launch_rate_per_s', 'with_sync', 0), paired=True)
    for size in sorted({k[3] for k in samples if k[0] == 'tls' and k[3]}):
        for metric in ('h2d_gbps', 'd2h_gbps'):
            for mode in ('pageable', 'pinned'):
                row('%s %s %s (GB/s) vs plaintext TCP' % (metric[:3].upper(), mode, human(size)),
                    'tls', ('tls', metric, mode, size), ('tcp', metric, mode, size), paired=True)
    row('CPU time per byte copied (ns/B, both sides) vs plaintext TCP', 'tls',
        ('tls', 'cpu_ns_per_byte', '', 0), ('tcp', 'cpu_ns_per_byte', '', 0), paired=True)
    for size in (1 << 20, 64 << 20):
        for metric in ('h2d_gbps', 'd2h_gbps'):
            for mode in ('pageable', 'pinned'):
                row('%s %s %s (GB/s) vs AEAD encrypt, one core' % (
                    metric[:3].upper(), mode, human(size)), 'tls', ('tls', metric, mode, size),
                    ('tls', 'aead_encrypt_gbps', '', 0), paired=True)


def human(size):
    for unit in ('B', 'KiB', 'MiB', 'GiB'):
        if size < 1024:
            return '%d %s' % (size, unit)
        size //= 1024
    return '%d TiB' % size


def fmt(s):
    if not s:
        return '-'
    v = s['median']
    return ('%.3g' % v) if v < 1000 else ('%.3e' % v)


if __name__ == '__main__':
    main()
