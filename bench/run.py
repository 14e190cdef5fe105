#!/usr/bin/env python3
"""Runs the benchmarks: each remoting figure beside the machine's limit for the same
transport, measured in the same run, as a ratio; median of several rounds with min-max.

  bench/run.py --build DIR [--rounds N] [--transports tcp,unix,shm] [--quick]
               [--output FILE]

Every round measures the limits (bench/raw_limits.c) and then the remoting layer
(bench/remote_bench.c through the stub, against a fresh cuda-remoted on the emulated
device, where the device side costs nearly nothing), one transport after the other:
  tcp   loopback TCP
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
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json_lines(cmd, env=None, timeout=900):
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit('bench: %s failed (%d):\n%s' % (' '.join(cmd), out.returncode, out.stderr))
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith('{')]


def start_server(build, transport, workdir, extra):
    on_unix = transport in ('unix', 'shm')
    listen = 'unix:' + os.path.join(workdir, 'bench.sock') if on_unix else '127.0.0.1:0'
    log = open(os.path.join(workdir, 'server-%s.log' % transport), 'w+')
    proc = subprocess.Popen([os.path.join(build, 'server', 'cuda-remoted'), '--backend', 'emu',
                             '--emu-memory', '2GiB', '--listen', listen] + extra,
                            stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, CUDA_REMOTE_LOG='info'))
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
                        'emu')
        finally:
            proc.terminate()
            proc.wait()


def key(r):
    return (r.get('transport', ''), r['metric'], r.get('mode', ''), r.get('size', 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--transports', default='tcp,unix,shm')
    ap.add_argument('--quick', action='store_true', help='fewer iterations (a smoke run)')
    ap.add_argument('--output', help='machine-readable results (JSON)')
    ap.add_argument('--no-kernels', action='store_true', help='skip kernel execution speed')
    ap.add_argument('--no-priority', action='store_true',
                    help='skip the latency of a high-priority tenant under load')
    ap.add_argument('--server-arg', action='append', default=[],
                    help='an extra argument for cuda-remoted')
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    transports = args.transports.split(',')
    samples = {}

    def add(record, transport=None):
        if transport:
            record['transport'] = transport
        samples.setdefault(key(record), []).append(record['value'])

    for rnd in range(args.rounds):
        print('round %d/%d' % (rnd + 1, args.rounds), file=sys.stderr)
        for r in run_json_lines([os.path.join(build, 'bench', 'raw_limits'), 'memcpy']):
            add(r)
        raw = list(transports)
        if 'shm' in raw and 'unix' not in raw:
            raw.append('unix')  # the shared-memory path's messages use the Unix socket
        for t in raw:
            for r in run_json_lines([os.path.join(build, 'bench', 'raw_limits'), t]):
                add(r)
        for t in transports:
            with tempfile.TemporaryDirectory(prefix='cr-bench-') as workdir:
                proc, address = start_server(build, t, workdir, args.server_arg)
                try:
                    env = dict(os.environ, CUDA_REMOTE_ADDR=address,
                               CUDA_REMOTE_SHM='1' if t == 'shm' else '0')
                    cmd = [os.path.join(build, 'bench', 'remote_bench')]
                    if args.quick:
                        cmd.append('--quick')
                    for r in run_json_lines(cmd, env=env):
                        add(r, t)
                finally:
                    proc.terminate()
                    proc.wait()
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

    def row(label, transport, fig_key, limit_key, invert=False):
        fig, lim = stat(fig_key), stat(limit_key)
        if not fig or not lim:
            return
        # latency: limit/figure would be < 1 for "slower"; report figure/limit for latency
        ratio = (fig['median'] / lim['median']) if not invert else (lim['median'] /
                                                                     fig['median'])
        rows.append((transport, label, fig, lim, ratio, fig_key[1], limit_key[1]))
        results.append({'transport': transport, 'figure': label, 'metric': fig_key[1],
                        'mode': fig_key[2], 'size': fig_key[3], 'value': fig,
                        'limit_metric': limit_key[1], 'limit': lim, 'ratio': ratio})

    for t in transports:
        # shared memory: messages still go over the Unix socket, bytes are memcpy'd
        msg = 'unix' if t == 'shm' else t
        row('sync call p50 (us) vs blocking round trip', t, (t, 'sync_call_us', 'p50', 0),
            (msg, 'rtt_blocking_us', '', 0), invert=False)
        row('sync call p50 (us) vs spinning round trip', t, (t, 'sync_call_us', 'p50', 0),
            (msg, 'rtt_spin_us', '', 0), invert=False)
        row('async launches/s vs coalesced messages/s', t,
            (t, 'launch_rate_per_s', 'with_sync', 0), (msg, 'msg_rate_per_s', '', 0))
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
        row('high tenant launch+wait %s (us) under low load vs alone' % q, 'emu',
            ('emu', 'launch_wait_us', 'high_under_low_' + q, 0),
            ('emu', 'launch_wait_us', 'high_alone_' + q, 0))
        row('high tenant launch+wait %s (us) under a low loop vs alone' % q, 'emu',
            ('emu', 'launch_wait_us', 'high_under_low_loop_' + q, 0),
            ('emu', 'launch_wait_us', 'high_alone_' + q, 0))
        row('normal tenant launch+wait %s (us) under normal vs alone' % q, 'emu',
            ('emu', 'launch_wait_us', 'normal_under_normal_' + q, 0),
            ('emu', 'launch_wait_us', 'normal_alone_' + q, 0))

    print('\n%-5s %-56s %12s %12s %8s' % ('path', 'figure (median [min-max])', 'value',
                                          'limit', 'ratio'))
    for t, label, fig, lim, ratio, _, _ in rows:
        print('%-5s %-56s %12s %12s %7.2fx' % (t, label, fmt(fig), fmt(lim), ratio))
    print('\nmemcpy one core: 1 MiB %s GB/s, 64 MiB %s GB/s' % (
        fmt(stat(('memcpy', 'memcpy_1m_gbps', '', 0))),
        fmt(stat(('memcpy', 'memcpy_64m_gbps', '', 0)))))
    for t in transports:
        if t != 'shm':
            print('%s stream: 1 MiB writes %s GB/s, 64 MiB writes %s GB/s' % (
                t, fmt(stat((t, 'bulk_1m_gbps', '', 0))), fmt(stat((t, 'bulk_64m_gbps', '', 0)))))
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
               'results': results,
               'samples': [{'key': list(k), 'values': v} for k, v in sorted(samples.items())]}
        with open(args.output, 'w') as f:
            json.dump(doc, f, indent=1)
        print('\nwrote %s' % args.output)


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
