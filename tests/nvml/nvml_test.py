#!/usr/bin/env python3
"""NVML in the container: NVIDIA's own nvidia-smi, gpustat and pynvml, through
cuda-remote's libnvidia-ml.so.1, show each tenant its own slice of the server's device.

A server runs with three tenants: alice (quota 256 MiB), bob (1 GiB) and carol (an admin,
no quota). A client of alice and one of bob (tenant_quota, built by nvcc) each allocate a
known amount and stay alive; then, as each tenant, every view is checked against what the
tenants did: total = the quota, used = what the tenant holds, its own processes (pid and
memory) and never the other's; the admin sees both. A wrong token and an unreachable
server make nvidia-smi fail at once with a clear message.

With --driver and --nvidia-nvml, the server runs its `cuda` backend on that driver library
(the emulated device packaged as one) with that stand-in for NVIDIA's NVML beside it, and
the test checks what the server passes through from it: driver version, serial, PCI ids,
temperature, power, clocks, and a sensor the device lacks; then that the server never
takes cuda-remote's own libnvidia-ml.so.1 for NVIDIA's.

With --gpu (tests/gpu/run.sh, CR_SERVER_ARGS="--backend cuda"), the same on a real GPU:
its name and sensors are compared with what NVIDIA's own nvidia-smi says natively, and
PyTorch's torch.cuda.device_count() and torch.cuda.utilization() go through the library.

  nvml_test.py --server BIN --stub DIR --nvidia ROOT --program tenant_quota --spin spin
               [--driver libcuda.so.1 --nvidia-nvml libnvidia-ml.so.1] [--gpu]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
import run  # noqa: E402

MiB = 1 << 20
TOKENS = {'alice': 'alice-token-0001', 'bob': 'bob-token-0002', 'carol': 'carol-token-0003'}
QUOTA = {'alice': 256 * MiB, 'bob': 1024 * MiB}
HELD = {'alice': 48 * MiB, 'bob': 200 * MiB}
DEVICE = 1024 * MiB  # the emulated device's memory (run.py's servers)


GPU = {}  # with --gpu: what NVIDIA's nvidia-smi says natively (native())


def free(tenant):
    """What is left of the tenant's quota, capped by what the device has free: on the
    emulated device bob's quota is the whole device, of which alice holds some."""
    if GPU:
        return QUOTA[tenant] - HELD[tenant]
    return min(QUOTA[tenant] - HELD[tenant], DEVICE - sum(HELD.values()))


def native():
    """The GPU's name and temperature as NVIDIA's nvidia-smi and NVML say them."""
    out = subprocess.run(['nvidia-smi', '--query-gpu=name,temperature.gpu',
                          '--format=csv,noheader', '-i', '0'], stdout=subprocess.PIPE,
                         text=True, check=True, timeout=60).stdout.strip()
    name, temperature = [f.strip() for f in out.split(',')]
    return {'name': name, 'temperature': int(temperature)}


def near_native_temperature(what, t):
    if not isinstance(t, int) or abs(t - GPU['temperature']) > 10:
        raise Failure('%s: temperature %r, natively %d C' % (what, t, GPU['temperature']))
    print('ok: %s: temperature %d C (natively %d C)' % (what, t, GPU['temperature']))


class Failure(Exception):
    pass


def expect(what, got, want):
    if got != want:
        raise Failure('%s: got %r, want %r' % (what, got, want))
    print('ok: %s' % what)


class Clients:
    """The NVML clients of one tenant (or of a wrong token)."""

    def __init__(self, args, server, token):
        self.args = args
        self.env = run.client_env(args.stub, server.address, {'CUDA_REMOTE_TOKEN': token})
        self.env['PYTHONPATH'] = os.path.join(args.nvidia, 'usr', 'lib', 'python3',
                                              'dist-packages')
        self.smi_path = os.path.join(args.nvidia, 'usr', 'lib', 'nvidia', 'current',
                                     'nvidia-smi')

    def run(self, argv, check=True):
        p = run.run_program(argv, self.env, 60)
        if check and p.returncode != 0:
            raise Failure('%s exited with %d:\n%s%s' % (' '.join(argv), p.returncode, p.stdout,
                                                        p.stderr))
        return p

    def smi(self, *argv, check=True):
        return self.run([self.smi_path] + list(argv), check)

    def gpustat(self):
        # Debian's Python packages after the interpreter's own, not before as PYTHONPATH
        # puts them: gpustat needs psutil, compiled for Debian's Python, which an
        # interpreter of another version has its own copy of (a GPU machine's Python)
        env = dict(self.env)
        packages = env.pop('PYTHONPATH')
        script = os.path.join(self.args.nvidia, 'usr', 'bin', 'gpustat')
        launcher = ('import runpy, sys; sys.path.append(%r); sys.argv = [%r, "--json"]; '
                    'runpy.run_path(%r, run_name="__main__")' % (packages, script, script))
        p = run.run_program([sys.executable, '-c', launcher], env, 60)
        if p.returncode != 0:
            raise Failure('gpustat exited with %d:\n%s%s' % (p.returncode, p.stdout, p.stderr))
        return json.loads(p.stdout)

    def pynvml(self, *argv):
        p = self.run([sys.executable, os.path.join(HERE, 'pynvml_client.py')] + list(argv))
        return json.loads(p.stdout)


def hold(args, server, tenant):
    env = run.client_env(args.stub, server.address, {'CUDA_REMOTE_TOKEN': TOKENS[tenant]})
    p = subprocess.Popen([args.program, 'hold', str(HELD[tenant])], env=env,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith('HOLDING'):
        p.kill()
        raise Failure('%s\'s holding client did not start: %r' % (tenant, line))
    return p


def check_smi(c, tenant, pids):
    """nvidia-smi's four views as `tenant`, whose client holds HELD[tenant] with pid
    pids[tenant]."""
    mine, other = pids[tenant], pids['bob' if tenant == 'alice' else 'alice']
    quota, held = QUOTA[tenant] // MiB, HELD[tenant] // MiB

    out = c.smi().stdout
    if not re.search(r'\b%dMiB /\s+%dMiB\b' % (held, quota), out):
        raise Failure('%s: the default view does not show %dMiB / %dMiB:\n%s' % (
            tenant, held, quota, out))
    rows = re.findall(r'^\|\s+0\s+N/A\s+N/A\s+(\d+)\s+C\s+(\S+)\s+(\d+)MiB \|$', out, re.M)
    expect('%s: the default view lists its own process only' % tenant, rows,
           [(str(mine), os.path.basename(c.args.program), str(held))])
    if str(other) in out:
        raise Failure('%s sees the other tenant\'s pid %d:\n%s' % (tenant, other, out))

    out = c.smi('-q').stdout
    fb = re.search(r'FB Memory Usage\s+Total\s+: (\d+) MiB\s+Reserved\s+: (\d+) MiB\s+'
                   r'Used\s+: (\d+) MiB\s+Free\s+: (\d+) MiB', out)
    expect('%s: nvidia-smi -q memory (total, reserved, used, free)' % tenant,
           fb and tuple(int(x) for x in fb.groups()),
           (quota, max(0, QUOTA[tenant] - HELD[tenant] - free(tenant)) // MiB, held,
            free(tenant) // MiB))
    expect('%s: nvidia-smi -q processes' % tenant, re.findall(r'Process ID\s+: (\d+)', out),
           [str(mine)])
    name = GPU['name'] if GPU else 'cuda-remote emulated device'
    if not re.search(r'Product Name\s+: %s' % re.escape(name), out):
        raise Failure('%s: nvidia-smi -q does not name the device %s:\n%s' % (tenant, name,
                                                                            out))

    out = c.smi('--query-gpu=name,uuid,memory.total,memory.used',
                '--format=csv,noheader').stdout.strip()
    fields = [f.strip() for f in out.split(',')]
    expect('%s: --query-gpu memory.total, memory.used' % tenant, fields[2:],
           ['%d MiB' % quota, '%d MiB' % held])
    if not fields[0].startswith(name) or \
            not re.fullmatch(r'GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}', fields[1]):
        raise Failure('%s: --query-gpu name and uuid: %r' % (tenant, out))

    out = c.smi('--query-compute-apps=pid,used_memory', '--format=csv').stdout
    expect('%s: --query-compute-apps' % tenant, out.strip().splitlines(),
           ['pid, used_gpu_memory [MiB]', '%d, %d MiB' % (mine, held)])
    return fields[1]


def check_gpustat(c, tenant, pids):
    g = c.gpustat()['gpus']
    expect('%s: gpustat sees one GPU' % tenant, len(g), 1)
    expect('%s: gpustat memory (used, total)' % tenant,
           (g[0]['memory.used'], g[0]['memory.total']),
           (HELD[tenant] // MiB, QUOTA[tenant] // MiB))
    expect('%s: gpustat processes' % tenant,
           [(p['pid'], p['gpu_memory_usage']) for p in g[0]['processes']],
           [(pids[tenant], HELD[tenant] // MiB)])
    if GPU:
        near_native_temperature('%s: gpustat' % tenant, g[0]['temperature.gpu'])
    else:
        expect('%s: gpustat has no temperature on the emulated device' % tenant,
               g[0]['temperature.gpu'], None)


def check_pynvml(c, tenant, pids, uuid):
    v = c.pynvml()
    expect('%s: pynvml device count' % tenant, v['count'], 1)
    expect('%s: pynvml memory (total, used, free)' % tenant, v['memory'],
           [QUOTA[tenant], HELD[tenant], free(tenant)])
    expect('%s: pynvml memory v2 agrees' % tenant, v['memory_v2'], v['memory'])
    expect('%s: pynvml memory v2: total = reserved + used + free' % tenant,
           v['reserved_v2'], max(0, QUOTA[tenant] - HELD[tenant] - free(tenant)))
    expect('%s: pynvml in a child forked after nvmlInit' % tenant, v['forked'],
           [1, v['memory'][0]])
    expect('%s: pynvml compute processes' % tenant, v['processes'],
           [[pids[tenant], HELD[tenant]]])
    expect('%s: pynvml graphics processes' % tenant, v['graphics'], [])
    expect('%s: pynvml uuid, and the handle by uuid' % tenant, (v['uuid'], v['by_uuid']),
           (uuid, True))
    expect('%s: pynvml process name' % tenant, v['process_name'],
           os.path.basename(c.args.program))
    errors = {'index_1': 'Invalid Argument', 'temperature': 'Not Supported',
              'clock': 'Not Supported', 'bar1': 'Not Supported',
              'after_shutdown': 'Uninitialized'}
    if GPU:  # the real device has them
        errors['temperature'] = errors['clock'] = 'no error'
        sensors = c.pynvml('sensors')
        near_native_temperature('%s: pynvml' % tenant, sensors['temperature'])
        if not isinstance(sensors['power'], int) or sensors['power'] <= 0:
            raise Failure('%s: pynvml power usage %r' % (tenant, sensors['power']))
        print('ok: %s: pynvml power %d mW, SM clock %r MHz' % (tenant, sensors['power'],
                                                              sensors['sm_clock']))
    expect('%s: pynvml errors (index 1, temperature, unsupported, after shutdown)' % tenant,
           v['errors'], errors)
    expect('%s: nvmlInit again after nvmlShutdown' % tenant, v['reinit_count'], 1)


def check_admin(c, pids):
    v = c.pynvml()
    expect('carol (admin): both tenants\' processes', sorted(v['processes']),
           sorted([[pids['alice'], HELD['alice']], [pids['bob'], HELD['bob']]]))
    out = c.smi('--query-compute-apps=pid,used_memory', '--format=csv,noheader').stdout
    expect('carol (admin): nvidia-smi lists both',
           sorted(out.strip().splitlines()),
           sorted('%d, %d MiB' % (pids[t], HELD[t] // MiB) for t in ('alice', 'bob')))


def check_utilization(args, server, alice, bob):
    """A tenant's utilization is the part of the device's recent time its work took; the
    other's stays 0, and it falls once the device idles."""
    env = run.client_env(args.stub, server.address, {'CUDA_REMOTE_TOKEN': TOKENS['alice']})
    busy = subprocess.Popen([args.spin, 'saturate', '6', '2000'], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, seen = time.time() + 8, 0
        while time.time() < deadline and seen < 50:
            time.sleep(0.5)
            seen = alice.pynvml('utilization')['utilization']
        if seen < 50:
            raise Failure('alice keeps the device busy, yet her utilization is %d%%' % seen)
        print('ok: alice keeps the device busy: utilization %d%%' % seen)
        expect('bob\'s utilization meanwhile', bob.pynvml('utilization')['utilization'], 0)
    finally:
        busy.kill()
        busy.wait()
    # an idle device is not busy, whoever used it last
    deadline = time.time() + 10
    while time.time() < deadline and seen >= 10:
        time.sleep(0.5)
        seen = alice.pynvml('utilization')['utilization']
    if seen >= 10:
        raise Failure('alice stopped, yet her utilization stays %d%%' % seen)
    print('ok: alice stopped: her utilization falls to %d%%' % seen)


def check_torch(args, server):
    """PyTorch's NVML-based calls go through the library (pynvml, as torch imports it)."""
    c = Clients(args, server, TOKENS['alice'])
    code = ('import json, torch\n'
            'torch.cuda.init()\n'
            'print(json.dumps([torch.cuda.device_count(), torch.cuda.utilization(0),\n'
            '                  torch.cuda.mem_get_info(0)[1]]))\n')
    p = c.run([sys.executable, '-c', code], check=False)
    if 'No module named \'torch\'' in p.stderr:
        print('SKIP: PyTorch is not installed here')
        return
    if p.returncode != 0:
        raise Failure('PyTorch through the library:\n%s%s' % (p.stdout, p.stderr))
    count, utilization, total = json.loads(p.stdout.strip().splitlines()[-1])
    expect('PyTorch: device count, memory total (alice\'s quota)', (count, total),
           (1, QUOTA['alice']))
    if not 0 <= utilization <= 100:
        raise Failure('PyTorch: torch.cuda.utilization() = %r' % utilization)
    print('ok: PyTorch: torch.cuda.utilization() = %d%%' % utilization)


def check_refusals(args, server):
    c = Clients(args, server, 'not-a-known-token')
    start = time.time()
    p = c.smi(check=False)
    took = time.time() - start
    if p.returncode == 0 or 'rejected' not in p.stderr or 'token' not in p.stderr:
        raise Failure('a wrong token: nvidia-smi exited %d:\n%s%s' % (p.returncode, p.stdout,
                                                                    p.stderr))
    if took > 10:
        raise Failure('a wrong token: nvidia-smi took %.1f s to give up' % took)
    print('ok: a wrong token: nvidia-smi exits %d in %.1f s: %s' % (
        p.returncode, took, p.stderr.strip().splitlines()[0]))
    c.env['CUDA_REMOTE_ADDR'] = 'unix:' + os.path.join(os.path.dirname(server.log_path),
                                                       'nobody.sock')
    p = c.smi('-L', check=False)
    if p.returncode == 0 or 'cannot reach cuda-remoted' not in p.stderr:
        raise Failure('no server: nvidia-smi -L exited %d:\n%s%s' % (p.returncode, p.stdout,
                                                                    p.stderr))
    print('ok: no server: nvidia-smi exits %d: %s' % (p.returncode,
                                                      p.stderr.strip().splitlines()[0]))


def test(server, args):
    holders = {}
    try:
        for tenant in ('alice', 'bob'):
            holders[tenant] = hold(args, server, tenant)
        pids = {t: p.pid for t, p in holders.items()}
        clients = {t: Clients(args, server, TOKENS[t]) for t in TOKENS}
        for tenant in ('alice', 'bob'):
            uuid = check_smi(clients[tenant], tenant, pids)
            check_gpustat(clients[tenant], tenant, pids)
            check_pynvml(clients[tenant], tenant, pids, uuid)
        check_admin(clients['carol'], pids)
        check_utilization(args, server, clients['alice'], clients['bob'])
        if GPU:
            check_torch(args, server)
        check_refusals(args, server)
    finally:
        for p in holders.values():
            p.kill()
            p.wait()


def write_tenants(workdir):
    path = os.path.join(workdir, 'tenants.json')
    with open(path, 'w') as f:
        json.dump({'tenants': [
            dict(name='alice', token=TOKENS['alice'], memory=QUOTA['alice']),
            dict(name='bob', token=TOKENS['bob'], memory=QUOTA['bob']),
            dict(name='carol', token=TOKENS['carol'], admin=True)]}, f)
    return ['--tenants', path]


def check_passed_through(server, args):
    """The stand-in's values, through the server, in nvidia-smi and pynvml."""
    alice = Clients(args, server, TOKENS['alice'])
    out = alice.smi().stdout
    for want in ('Driver Version: 580.95.05', '41C', 'P0', '71W / 700W'):
        if want not in out:
            raise Failure('nvidia-smi does not show %r:\n%s' % (want, out))
    print('ok: nvidia-smi shows the driver version, temperature, pstate and power')
    out = alice.smi('-q').stdout
    for pattern in (r'Serial Number\s+: 1650123456789', r'Device Id\s+: 0x233010DE',
                    r'Sub System Id\s+: 0x16C110DE', r'GPU Current Temp\s+: 41 C',
                    r'Graphics\s+: 1980 MHz', r'Memory\s+: 2619 MHz'):
        if not re.search(pattern, out):
            raise Failure('nvidia-smi -q lacks %s:\n%s' % (pattern, out))
    print('ok: nvidia-smi -q shows serial, PCI ids, temperature and clocks')
    v = alice.pynvml('sensors')
    expect('pynvml: temperature, power, limit, SM clock, fan (the device has none)',
           v, {'temperature': 41, 'power': 71234, 'limit': 700000, 'sm_clock': 1980,
               'fan': 'Not Supported'})


def check_backend_cuda(args):
    with tempfile.TemporaryDirectory(prefix='cr-test-') as workdir:
        for name, nvml in (('nvidia', args.nvidia_nvml),
                           ('ours', os.path.join(args.stub, 'libnvidia-ml.so.1'))):
            folder = os.path.join(workdir, name)
            os.mkdir(folder)
            os.symlink(args.driver, os.path.join(folder, 'libcuda.so.1'))
            os.symlink(nvml, os.path.join(folder, 'libnvidia-ml.so.1'))
            server = run.Server(args.server, folder, 'unix', backend='cuda',
                                driver=os.path.join(folder, 'libcuda.so.1'),
                                extra=write_tenants(folder))
            try:
                if name == 'nvidia':
                    check_passed_through(server, args)
                else:  # cuda-remote's own library beside the driver is not NVIDIA's
                    v = Clients(args, server, TOKENS['alice']).pynvml('sensors')
                    expect('with our own library beside the driver: no sensors',
                           v['temperature'], 'Not Supported')
                    server.wait_for("NVIDIA's libnvidia-ml.so.1 cannot be opened")
                    print('ok: the server says it has no NVIDIA NVML')
                if server.proc.poll() is not None:
                    raise Failure('the server died')
            except Exception:
                server.stop()
                print('--- server log ---\n' + server.log_text(), file=sys.stderr)
                raise
            server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True)
    ap.add_argument('--nvidia', required=True, help='NVIDIA\'s clients, unpacked')
    ap.add_argument('--program', required=True, help='tenant_quota')
    ap.add_argument('--spin', required=True, help='tests/tenants/spin')
    ap.add_argument('--driver', help='a driver library for the cuda backend')
    ap.add_argument('--nvidia-nvml', help='a stand-in for NVIDIA\'s NVML beside it')
    ap.add_argument('--gpu', action='store_true',
                    help='the server runs on a real GPU (CR_SERVER_ARGS="--backend cuda")')
    args = ap.parse_args()
    if args.gpu:
        GPU.update(native())
    if args.driver:
        try:
            check_backend_cuda(args)
        except (Failure, run.Failure, OSError, ValueError, KeyError,
                subprocess.TimeoutExpired) as e:
            print('nvml_test.py: FAILED: %r' % e, file=sys.stderr)
            return 1
        return 0
    return run.with_server('nvml_test.py', args.server, lambda server: test(server, args),
                           extra=write_tenants,
                           errors=(Failure, run.Failure, OSError, ValueError, KeyError,
                                   subprocess.TimeoutExpired))


if __name__ == '__main__':
    sys.exit(main())
