#!/usr/bin/env python3
"""PyTorch through the stub on a GPU, against PyTorch on NVIDIA's driver directly.

Runs tests/gpu/torch_worker.py twice with the same seeds: natively, then through the stub
against a server on the real driver (backend from CR_SERVER_ARGS, as the GPU check sets it)
as a tenant with a memory quota. Passes when every part passes in both runs and:
  - torch.cuda.mem_get_info through the stub reports the tenant's quota as the total;
  - the CNN's loss curve matches the native one step by step (cuDNN and cuBLAS in their
    deterministic modes, so both runs compute the same sums);
  - the transformer's loss and gradients match the native run's;
  - a CUDA graph captured from a small MLP replays with new inputs as the eager model.
Prints the native and remote timings side by side (training step, launch rate, a bf16
matmul, 256 MiB copies) and, with --output, writes everything as JSON. The stub's stderr
(each driver call it does not remote says so once) and the server's log are printed when
something fails, and kept with --keep DIR. Exits 77 when python3 has no PyTorch with CUDA.

  torch_test.py --server BIN --stub DIR [--steps N] [--output FILE] [--keep DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
import run  # noqa: E402

WORKER = os.path.join(HERE, 'torch_worker.py')
TOKEN = 'torch-gpu-check-token'
QUOTA = 16 << 30
LOSS_TOLERANCE = 1e-5  # relative, per step
TIMINGS = (('train_step_ms', 'CNN training step, ms', 'lower'),
           ('launches_per_s', 'launches (add_ of 16 floats) per s', 'higher'),
           ('matmul_4096_bf16_tflops', '4096^3 bf16 matmul, TFLOP/s', 'higher'),
           ('matmul_8192_bf16_tflops', '8192^3 bf16 matmul, TFLOP/s', 'higher'),
           ('eager_forward_us', 'MLP forward, eager, us', 'lower'),
           ('graph_replay_us', 'MLP forward, CUDA graph replay, us', 'lower'),
           ('h2d_256MiB_GBps', '256 MiB host to device (pageable), GB/s', 'higher'),
           ('d2h_256MiB_GBps', '256 MiB device to host (pageable), GB/s', 'higher'))


def run_worker(env, args, log_path, timeout):
    """The worker's results by part; its stderr goes to log_path."""
    with open(log_path, 'w') as log:
        try:
            p = subprocess.run([sys.executable, WORKER, '--steps', str(args.steps)], env=env,
                               stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout)
            out, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ''), \
                'timed out after %d s' % timeout
    parts = {}
    for line in out.splitlines():
        if line.startswith('{'):
            r = json.loads(line)
            parts[r['part']] = r
    return parts, rc


def compare(native, remote, failures):
    """Checks remote against native; appends what differs to failures."""
    for name in ('init', 'ops', 'matmul', 'libs', 'cnn', 'transformer', 'graph', 'timing'):
        for who, parts in (('native', native), ('remote', remote)):
            r = parts.get(name)
            if r is None:
                failures.append('%s: part %s did not finish' % (who, name))
            elif not r['ok']:
                failures.append('%s: part %s failed: %s' % (who, name, r['error']))
    init = remote.get('init', {})
    if init.get('ok') and init['mem_total'] != QUOTA:
        failures.append('remote: mem_get_info total %d, not the tenant quota %d'
                        % (init['mem_total'], QUOTA))
    n, r = native.get('cnn', {}), remote.get('cnn', {})
    if n.get('ok') and r.get('ok'):
        worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(r['losses'], n['losses']))
        same = sum(a == b for a, b in zip(r['losses'], n['losses']))
        print('cnn: %d steps, loss %.5f -> %.5f; remote equal to native at %d steps, '
              'largest relative difference %.3g' % (len(n['losses']), n['losses'][0],
                                                    n['losses'][-1], same, worst))
        if len(r['losses']) != len(n['losses']) or worst > LOSS_TOLERANCE:
            failures.append('cnn: the remote loss curve departs from the native one '
                            '(relative %.3g)' % worst)
    n, r = native.get('transformer', {}), remote.get('transformer', {})
    if n.get('ok') and r.get('ok'):
        for key in ('loss', 'grad_in', 'grad_params'):
            d = abs(r[key] - n[key]) / max(abs(n[key]), 1e-12)
            print('transformer %s: native %.6g remote %.6g (relative %.3g)'
                  % (key, n[key], r[key], d))
            if d > 1e-4:
                failures.append('transformer: %s differs (relative %.3g)' % (key, d))


def print_timings(native, remote):
    n, r = dict(native.get('graph', {})), dict(remote.get('graph', {}))
    n.update(native.get('timing', {}))
    r.update(remote.get('timing', {}))
    print('%-44s %12s %12s %8s' % ('', 'native', 'remote', 'of native'))
    for key, label, better in TIMINGS:
        if key in n and key in r:  # remote's speed as a fraction of native's
            speed = r[key] / n[key] if better == 'higher' else n[key] / r[key]
            print('%-44s %12.4g %12.4g %8.2f' % (label, n[key], r[key], speed))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True)
    ap.add_argument('--steps', type=int, default=300)
    ap.add_argument('--timeout', type=int, default=300, help='seconds for each run')
    ap.add_argument('--output')
    ap.add_argument('--keep', help='a folder for the worker logs and the server log')
    args = ap.parse_args()
    probe = subprocess.run([sys.executable, '-c', 'import torch; print(torch.cuda.is_available())'],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if probe.stdout.strip() != 'True':
        print('torch_test: no PyTorch with a usable GPU in %s: skipped' % sys.executable)
        return 77
    keep = args.keep or os.path.join('/tmp', 'cr-torch-test')
    os.makedirs(keep, exist_ok=True)

    env = dict(os.environ)
    print('torch_test: native run', flush=True)
    native, native_rc = run_worker(env, args, os.path.join(keep, 'native.log'), args.timeout)

    def write_tenants(workdir):
        path = os.path.join(workdir, 'tenants.json')
        with open(path, 'w') as f:
            json.dump({'tenants': [{'name': 'torch', 'token': TOKEN,
                                    'memory': '%dGiB' % (QUOTA >> 30)}]}, f)
        return ['--tenants', path]

    remote = {}
    failures = []

    def test(server):
        nonlocal remote
        print('torch_test: remote run', flush=True)
        env = run.client_env(args.stub, server.address, {'CUDA_REMOTE_TOKEN': TOKEN,
                                                         'CUDA_REMOTE_LOG': 'info'})
        remote, rc = run_worker(env, args, os.path.join(keep, 'remote.log'), args.timeout)
        shutil.copy(server.log_path, os.path.join(keep, 'server.log'))
        compare(native, remote, failures)
        print_timings(native, remote)
        if failures:
            with open(os.path.join(keep, 'remote.log')) as f:
                print('--- remote worker stderr (last 80 lines) ---\n'
                      + ''.join(f.readlines()[-80:]), file=sys.stderr)
            raise run.Failure('; '.join(failures) + ' (native exit %s, remote exit %s)'
                              % (native_rc, rc))

    status = run.with_server('torch_test.py', args.server, test, extra=write_tenants,
                             errors=(subprocess.TimeoutExpired, OSError))
    if args.output:
        with open(args.output, 'w') as f:
            json.dump({'native': native, 'remote': remote, 'failures': failures}, f, indent=1)
    print('torch_test: %s' % ('passed' if status == 0 else 'FAILED'))
    return status


if __name__ == '__main__':
    sys.exit(main())
