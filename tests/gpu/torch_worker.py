#!/usr/bin/env python3
"""PyTorch's side of the GPU check (tests/gpu/torch_test.py runs it twice: on NVIDIA's
driver directly, then through the stub). Each part prints one JSON line on stdout when it
ends, ok or not, so a part that fails or hangs leaves the others' results behind; progress
goes to stderr. The parts check their own results against the CPU where there is one; the
driver compares the two runs (loss curves, sums, timings).

  torch_worker.py [--steps N] [--parts init,ops,...]
"""
import argparse
import json
import math
import os
import sys
import time
import traceback

# cuBLAS is deterministic only with a fixed workspace; set before torch loads it
os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

PARTS = ('init', 'ops', 'matmul', 'libs', 'cnn', 'transformer', 'graph', 'timing')


def say(*what):
    print('torch_worker:', *what, file=sys.stderr, flush=True)


def close(a, b, tol):
    """Largest difference of a and b relative to b's largest magnitude."""
    a, b = a.double().cpu(), b.double().cpu()
    scale = max(b.abs().max().item(), 1e-30)
    err = (a - b).abs().max().item() / scale
    if not err <= tol:
        raise AssertionError('relative error %.3g above %.3g' % (err, tol))
    return err


def part_init(r, args):
    r['available'] = torch.cuda.is_available()
    assert r['available'], 'torch.cuda.is_available() is False'
    r['device'] = torch.cuda.get_device_name(0)
    r['capability'] = list(torch.cuda.get_device_capability(0))
    free, total = torch.cuda.mem_get_info(0)
    r['mem_free'], r['mem_total'] = free, total
    r['torch'] = torch.__version__
    assert 0 < free <= total


def part_ops(r, args):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1000, 300, generator=g)
    y = torch.randn(1000, 300, generator=g)
    dx, dy = x.cuda(), y.cuda()
    checks = {
        'add_mul': (dx * 2 + dy, x * 2 + y),
        'exp_tanh': (torch.tanh(dx).exp(), torch.tanh(x).exp()),
        'sum_rows': (dx.sum(1), x.sum(1)),
        'max_cols': (dx.max(0).values, x.max(0).values),
        'softmax': (F.softmax(dx, 1), F.softmax(x, 1)),
        'index': (dx[torch.arange(0, 1000, 7, device='cuda')], x[torch.arange(0, 1000, 7)]),
        'sort': (dx[:, 0].sort().values, x[:, 0].sort().values),
        'cumsum': (dx.cumsum(0), x.cumsum(0)),
    }
    r['errors'] = {k: close(a, b, 1e-4) for k, (a, b) in checks.items()}
    z = torch.zeros(1 << 20, device='cuda')
    z[::3] = 1
    assert int(z.sum().item()) == (1 << 20) // 3 + 1


def part_matmul(r, args):
    g = torch.Generator().manual_seed(2)
    m, n, k = 384, 320, 256
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    ref = a.double() @ b.double()
    r['errors'] = {}
    for name, dtype, tol in (('float32', torch.float32, 1e-5), ('float16', torch.float16, 1e-2),
                             ('bfloat16', torch.bfloat16, 5e-2)):
        c = a.to('cuda', dtype) @ b.to('cuda', dtype)
        r['errors'][name] = close(c, ref, tol)
    # an odd shape and a batched product
    a, b = torch.randn(37, 29, generator=g), torch.randn(29, 53, generator=g)
    r['errors']['float32_odd'] = close(a.cuda() @ b.cuda(), a.double() @ b.double(), 1e-5)
    a, b = torch.randn(6, 33, 17, generator=g), torch.randn(6, 17, 45, generator=g)
    r['errors']['float32_batched'] = close(torch.bmm(a.cuda(), b.cuda()),
                                           torch.bmm(a.double(), b.double()), 1e-5)


def part_libs(r, args):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(256, 256, dtype=torch.complex64, generator=g)
    r['fft2'] = close(torch.fft.fft2(x.cuda()), torch.fft.fft2(x.to(torch.complex128)), 1e-4)
    a = torch.randn(64, 64, generator=g) + 64 * torch.eye(64)
    b = torch.randn(64, 3, generator=g)
    r['solve'] = close(torch.linalg.solve(a.cuda(), b.cuda()),
                       torch.linalg.solve(a.double(), b.double()), 1e-4)
    spd = a @ a.T
    r['cholesky'] = close(torch.linalg.cholesky(spd.cuda()), torch.linalg.cholesky(spd.double()),
                          1e-4)
    conv_in, conv_w = torch.randn(4, 8, 20, 20, generator=g), torch.randn(16, 8, 3, 3, generator=g)
    r['conv2d'] = close(F.conv2d(conv_in.cuda(), conv_w.cuda(), padding=1),
                        F.conv2d(conv_in.double(), conv_w.double(), padding=1), 1e-4)
    s = torch.randn(1 << 20, device='cuda', generator=torch.Generator('cuda').manual_seed(4))
    r['randn_mean'], r['randn_std'] = s.mean().item(), s.std().item()
    assert abs(r['randn_mean']) < 0.01 and abs(r['randn_std'] - 1) < 0.01


class SmallCNN(nn.Module):
    """Convolutions, batch norm and a linear layer, built only of operations with
    deterministic backward passes on CUDA (no max or adaptive pooling, whose backward
    passes add with atomics), so that two runs compute the same sums."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AvgPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=(2, 3)))


def cnn_setup():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(5)
    data = [(torch.randn(64, 3, 32, 32, generator=g).cuda(),
             F.one_hot(torch.randint(0, 10, (64,), generator=g), 10).float().cuda())
            for _ in range(8)]
    model = SmallCNN().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, opt, data


def cnn_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    # cross entropy on one-hot targets: gather's backward would add with atomics
    loss = -(F.log_softmax(model(x), 1) * y).sum(1).mean()
    loss.backward()
    opt.step()
    return loss


def part_cnn(r, args):
    model, opt, data = cnn_setup()
    losses = []
    for step in range(args.steps):
        x, y = data[step % len(data)]
        losses.append(cnn_step(model, opt, x, y).item())  # a sync each step, as loops do
        if step % 100 == 0:
            say('cnn step %d loss %.5f' % (step, losses[-1]))
    r['losses'] = losses
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0], 'the loss did not fall'


def part_transformer(r, args):
    torch.manual_seed(6)
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, dropout=0.0,
                                       batch_first=True).cuda()
    g = torch.Generator().manual_seed(7)
    x = torch.randn(8, 64, 128, generator=g).cuda().requires_grad_()
    # against a target: the mean square of a layer-normed output alone is about 1 whatever
    # the input, and its gradient mostly rounding
    target = torch.randn(8, 64, 128, generator=g)
    loss = (layer(x) - target.cuda()).pow(2).mean()
    loss.backward()
    r['loss'] = loss.item()
    r['grad_in'] = x.grad.double().abs().sum().item()
    r['grad_params'] = sum(p.grad.double().abs().sum().item() for p in layer.parameters())
    # the same layer on the CPU in float64: forward and backward agree
    cpu = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, dropout=0.0,
                                     batch_first=True).double()
    cpu.load_state_dict({k: v.double().cpu() for k, v in layer.state_dict().items()})
    xc = x.detach().double().cpu().requires_grad_()
    lc = (cpu(xc) - target.double()).pow(2).mean()
    lc.backward()
    r['loss_error'] = abs(r['loss'] - lc.item()) / abs(lc.item())
    r['grad_error'] = close(x.grad, xc.grad, 1e-3)
    assert r['loss_error'] < 1e-4


def part_graph(r, args):
    """A CUDA graph captured from a small MLP (torch.cuda.graph): replays follow new inputs
    and equal the eager forward; per-forward time of replays against eager calls."""
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)).cuda()
    static_in = torch.randn(64, 256, device='cuda')
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):  # warm-up: cuBLAS's handle and workspace before the capture
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_out = model(static_in)
    errors = []
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(64, 256, device='cuda')
            static_in.copy_(x)
            graph.replay()
            errors.append(close(static_out, model(x), 1e-5))
        r['error'] = max(errors)
        n = 200
        r['graph_replay_us'] = timed(lambda: [graph.replay() for _ in range(n)]) / n * 1e6
        r['eager_forward_us'] = timed(lambda: [model(static_in) for _ in range(n)]) / n * 1e6


def timed(fn, sync=True):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    if sync:
        torch.cuda.synchronize()
    return time.perf_counter() - t


def part_timing(r, args):
    model, opt, data = cnn_setup()
    for i in range(10):
        cnn_step(model, opt, *data[i % 8])
    steps = 100
    r['train_step_ms'] = timed(lambda: [cnn_step(model, opt, *data[i % 8])
                                        for i in range(steps)]) / steps * 1e3
    t = torch.zeros(16, device='cuda')
    n = 20000
    t.add_(1)
    r['launches_per_s'] = n / timed(lambda: [t.add_(1) for _ in range(n)])
    assert t[0].item() == n + 1
    a = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    reps = 20
    s = timed(lambda: [a @ b for _ in range(reps)])
    r['matmul_4096_bf16_ms'] = s / reps * 1e3
    r['matmul_4096_bf16_tflops'] = 2 * 4096 ** 3 * reps / s / 1e12
    # products 8 times longer: a cost per call shrinks here, a slower kernel does not
    a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
    a @ b
    s = timed(lambda: [a @ b for _ in range(reps)])
    r['matmul_8192_bf16_tflops'] = 2 * 8192 ** 3 * reps / s / 1e12
    host = torch.ones(64 << 20, dtype=torch.float32)  # 256 MiB, pageable
    dev = torch.empty_like(host, device='cuda')
    dev.copy_(host)
    s = min(timed(lambda: dev.copy_(host)) for _ in range(3))
    r['h2d_256MiB_GBps'] = host.numel() * 4 / s / 1e9
    back = dev.cpu()
    assert back[12345].item() == 1.0
    s = min(timed(lambda: dev.cpu()) for _ in range(3))
    r['d2h_256MiB_GBps'] = host.numel() * 4 / s / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--steps', type=int, default=300)
    ap.add_argument('--parts', default=','.join(PARTS))
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.allow_tf32 = False  # results checked against float64 on the CPU
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    for name in args.parts.split(','):
        r = {'part': name}
        t = time.perf_counter()
        say('part %s' % name)
        try:
            globals()['part_' + name](r, args)
            r['ok'] = True
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            r['ok'] = False
            r['error'] = '%s: %s' % (type(e).__name__, e)
            say(traceback.format_exc())
        r['seconds'] = round(time.perf_counter() - t, 3)
        print(json.dumps(r), flush=True)


if __name__ == '__main__':
    main()
