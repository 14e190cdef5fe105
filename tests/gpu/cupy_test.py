#!/usr/bin/env python3
"""CuPy through the stub on a GPU: array operations, cupy.matmul (cuBLAS), a RawKernel
compiled by NVRTC at run time, cupy.fft (cuFFT) and cupy.random (cuRAND), each checked
against NumPy. Runs its own server on the real driver (backend from CR_SERVER_ARGS, as the
GPU check sets it). Exits 77 when python3 has no CuPy.

  cupy_test.py --server BIN --stub DIR
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
import run  # noqa: E402

# runs in the client process, through the stub; prints CHECK lines and one OK line
CLIENT = r'''
import numpy as np, cupy as cp
rng = np.random.default_rng(1)
def check(name, got, want, tol):
    got = cp.asnumpy(got).astype(np.float64); want = np.asarray(want, dtype=np.float64)
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    print('CHECK %s %.3g' % (name, err), flush=True)
    assert err <= tol, (name, err)
x = rng.standard_normal((500, 300)).astype(np.float32)
y = rng.standard_normal((500, 300)).astype(np.float32)
dx, dy = cp.asarray(x), cp.asarray(y)
check('elementwise', cp.sin(dx) * dy + 1, np.sin(x) * y + 1, 1e-5)
check('reduce', dx.sum(axis=0), x.astype(np.float64).sum(axis=0), 1e-4)
a = rng.standard_normal((257, 129)).astype(np.float32)
b = rng.standard_normal((129, 65)).astype(np.float32)
check('matmul', cp.matmul(cp.asarray(a), cp.asarray(b)), a.astype(np.float64) @ b, 1e-5)
k = cp.RawKernel(r"""
extern "C" __global__ void axpb(const float *x, float *y, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}""", 'axpb')
n = 1000003
h = rng.standard_normal(n).astype(np.float32)
out = cp.empty(n, dtype=cp.float32)
k(((n + 255) // 256,), (256,), (cp.asarray(h), out, cp.float32(3), cp.float32(-1), cp.int32(n)))
check('raw_kernel', out, 3 * h.astype(np.float64) - 1, 1e-6)
c = rng.standard_normal((128, 128)) + 1j * rng.standard_normal((128, 128))
check('fft2', cp.abs(cp.fft.fft2(cp.asarray(c))), np.abs(np.fft.fft2(c)), 1e-9)
r = cp.random.default_rng(7).standard_normal(1 << 20, dtype=cp.float32)
mean, std = float(r.mean()), float(r.std())
print('CHECK random mean %.4f std %.4f' % (mean, std), flush=True)
assert abs(mean) < 0.01 and abs(std - 1) < 0.01
u = cp.random.RandomState(3).uniform(size=1 << 20)  # cuRAND's generator
assert 0.49 < float(u.mean()) < 0.51, float(u.mean())
print('OK', flush=True)
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True)
    args = ap.parse_args()
    probe = subprocess.run([sys.executable, '-c', 'import cupy, numpy'],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        print('cupy_test: no CuPy in %s: skipped' % sys.executable)
        return 77

    def test(server):
        # the stub names each driver call and table slot it does not serve
        env = run.client_env(args.stub, server.address, {'CUDA_REMOTE_LOG': 'info'})
        p = run.run_program([sys.executable, '-c', CLIENT], env, 300)
        print(p.stdout + p.stderr)
        if p.returncode != 0 or 'OK' not in p.stdout.split():
            raise run.Failure('cupy client failed (%d)' % p.returncode)

    return run.with_server('cupy_test.py', args.server, test)


if __name__ == '__main__':
    sys.exit(main())
