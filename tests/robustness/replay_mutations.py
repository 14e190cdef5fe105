#!/usr/bin/env python3
"""Hostile-client test: records the frames a real client sends, then replays them to a
fresh server with seeded mutations (bit flips in headers and bodies, truncated bodies,
wrong lengths, reordered and repeated frames) on many connections. The server must never
crash or hang, must close only the offending connection, and must still serve a real
client afterwards with correct results.

  replay_mutations.py --server BIN --stub DIR [--rounds N] [--seed S] PROGRAM [ARGS...]
"""
import argparse
import os
import random
import re
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'integration'))
import run  # noqa: E402  (the integration harness: Server, client_env)

HEADER = struct.Struct('<IHHIIQQ')


def read_frames(data):
    """Splits a byte stream into frames (header, body, bulk)."""
    frames, pos = [], 0
    while pos + HEADER.size <= len(data):
        magic, ver, op, flags, body_len, call_id, bulk_len = HEADER.unpack_from(data, pos)
        end = pos + HEADER.size + body_len + bulk_len
        if end > len(data):
            break
        frames.append(data[pos:end])
        pos = end
    return frames


class Recorder:
    """A TCP proxy in front of the server that keeps what the client sent."""

    def __init__(self, target):
        self.target = target
        self.listener = socket.socket()
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(1)
        self.address = '127.0.0.1:%d' % self.listener.getsockname()[1]
        self.sent = bytearray()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        client, _ = self.listener.accept()
        host, port = self.target.rsplit(':', 1)
        server = socket.create_connection((host, int(port)))
        peers = {client: server, server: client}
        while True:
            ready, _, _ = select.select(list(peers), [], [], 30)
            if not ready:
                break
            for s in ready:
                data = s.recv(1 << 20)
                if not data:
                    client.close()
                    server.close()
                    return
                if s is client:
                    self.sent += data
                peers[s].sendall(data)


def mutate(frames, rng):
    """One hostile conversation derived from a real one (the hello stays first)."""
    out = [bytearray(f) for f in frames]
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(1, len(out)) if len(out) > 1 else 0
        f = out[i]
        kind = rng.randrange(6)
        if kind == 0:  # flip a bit in the header
            f[rng.randrange(HEADER.size)] ^= 1 << rng.randrange(8)
        elif kind == 1 and len(f) > HEADER.size:  # flip bits in the body or bulk
            for _ in range(rng.randint(1, 8)):
                f[rng.randrange(HEADER.size, len(f))] ^= 1 << rng.randrange(8)
        elif kind == 2:  # lie about the body length
            struct.pack_into('<I', f, 12, rng.choice([0, 1, 7, 1 << 22, 0xffffffff,
                                                      rng.randrange(1 << 16)]))
        elif kind == 3:  # lie about the bulk length
            struct.pack_into('<Q', f, 24, rng.choice([0, 1, 1 << 20, 1 << 40,
                                                      rng.randrange(1 << 24)]))
        elif kind == 4:  # any opcode with this body
            struct.pack_into('<H', f, 6, rng.randrange(0, 600))
        else:  # repeat a frame
            out.insert(i, bytearray(f))
    if rng.random() < 0.3:  # end the conversation inside a frame
        i = rng.randrange(len(out))
        out[i] = out[i][:rng.randrange(len(out[i]) + 1)]
        del out[i + 1:]
    return b''.join(out)


def converse(address, data, timeout):
    """Sends a conversation; reads until the server closes or goes quiet."""
    host, port = address.rsplit(':', 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not s.recv(1 << 16):
                return
    except (OSError, socket.timeout):  # the server closed on us: what we expect often
        return
    finally:
        s.close()


def wait_until_released(server, seconds=60):
    """Waits until every session the server has had released its resources (its log says
    so; one that ended before its hello had none): a mutated conversation's work may still
    run after its connection closed, and its launches must not land among those the last,
    checked run makes."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        log = server.log_text()
        seen = set(re.findall(r'session (\d+): ', log))
        released = set(re.findall(r'session (\d+): resources of .* released', log))
        # one that ended before its hello never had any
        released |= set(re.findall(r'session (\d+): client from \S+ ended', log))
        if seen <= released:
            return
        time.sleep(0.1)
    lines = [line for line in log.splitlines()
             if any('session %s: ' % n in line for n in seen - released)]
    raise run.Failure('sessions %s never released their resources:\n%s' %
                      (sorted(seen - released), '\n'.join(lines)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True)
    ap.add_argument('--rounds', type=int, default=int(os.environ.get('CR_MUTATION_ROUNDS',
                                                                      300)))
    ap.add_argument('--seed', type=int, default=int(os.environ.get('CR_MUTATION_SEED', 1)))
    ap.add_argument('program', nargs=argparse.REMAINDER)
    args = ap.parse_args()
    args.timeout, args.backend = 60, 'emu'  # what the harness's plain scenario reads
    with tempfile.TemporaryDirectory(prefix='cr-mutate-') as workdir:
        server = run.Server(args.server, workdir, 'tcp')
        try:
            recorder = Recorder(server.address)
            p = run.run_program(args.program, run.client_env(args.stub, recorder.address), 60)
            if p.returncode != 0:
                raise run.Failure('recording run failed:\n%s%s' % (p.stdout, p.stderr))
            recorder.thread.join(10)
            frames = read_frames(bytes(recorder.sent))
            if len(frames) < 10:
                raise run.Failure('recorded only %d frames' % len(frames))
            rng = random.Random(args.seed)
            started = time.time()
            for i in range(args.rounds):
                converse(server.address, mutate(frames, rng), 5)
                if server.proc.poll() is not None:
                    raise run.Failure('the server died at round %d (seed %d):\n%s' % (
                        i, args.seed, server.log_text()))
            # still serving, and correctly: the launch trace checked is the last run's (the
            # server appends to it; the recording's launches were made at other addresses
            # whenever a mutated conversation's memory had not gone back yet)
            wait_until_released(server)
            open(server.trace_path, 'w').close()
            run.scenario_plain(args, server)
            if server.proc.poll() is not None:
                raise run.Failure('the server died:\n' + server.log_text())
            for bad in ('AddressSanitizer', 'runtime error:'):
                if bad in server.log_text():
                    raise run.Failure('server reported %s' % bad)
            print('replay_mutations: %d frames recorded, %d mutated conversations in %.1fs; '
                  'the server survived and still serves' % (len(frames), args.rounds,
                                                            time.time() - started))
        except run.Failure as e:
            print('replay_mutations: FAILED: %s' % e, file=sys.stderr)
            server.stop()
            print('--- server log (tail) ---\n' + server.log_text()[-4000:], file=sys.stderr)
            return 1
        server.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
