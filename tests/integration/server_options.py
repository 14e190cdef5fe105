#!/usr/bin/env python3
"""cuda-remoted's command line: what --help lists is what the parser takes.

--help lists each option once (unit.options checks the list against the option table
itself). Every option it lists is accepted with a valid value, and so is every default and
both ends of every range it shows: the option after it, an unknown one, is then the first
the parser refuses. Values outside a range it shows, and other wrong values, are refused
with exit status 2 and a message that names the option and the value; an unknown option, a
missing argument and a stray argument are refused the same way. Last, the server starts
with every listed option given at once, and says so with the values it was given.

  server_options.py --server BIN
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

UNKNOWN = '--no-such-option'


class Failure(Exception):
    pass


def valid_values(tmp):
    """A value each option takes; an option --help lists and this does not know fails the
    test (add it here)."""
    return {
        'listen': '127.0.0.1:0', 'backend': 'emu', 'device': '0',
        'driver': '/nonexistent/libcuda.so.1', 'emu-memory': '1GiB',
        'emu-trace': os.path.join(tmp, 'trace.jsonl'), 'emu-faults': 'context',
        'emu-compute-capability': '8.6', 'max-queued': '64M', 'max-queued-per-tenant': '512MiB',
        'max-unsent': '32MiB', 'max-connections': '64', 'max-per-address': '8',
        'hello-timeout': '5', 'max-sessions-per-tenant': '4', 'max-shared': '1GiB',
        'no-shm': None,
        'tenants': os.path.join(tmp, 'tenants.json'), 'metrics': '127.0.0.1:0', 'log': 'info',
        'tls-cert': os.path.join(tmp, 'cert.pem'), 'tls-key': os.path.join(tmp, 'key.pem'),
        'tls-client-ca': os.path.join(tmp, 'cert.pem'), 'insecure': None,
    }


# Wrong values of options without a range in --help, and the reason the parser gives.
INVALID = {
    'emu-memory': [('lots', 'not a size'), ('0', 'not a size'), ('4X', 'not a size')],
    'max-queued': [('-1', 'not a size')],
    'max-queued-per-tenant': [('0.1', 'not a size')],
    'max-unsent': [('0', 'not a size')],
    'max-shared': [('0', 'not a size'), ('some', 'not a size')],
    'emu-faults': [('all', 'session or context')],
    'emu-compute-capability': [('7.0', 'not a compute capability the emulated device knows'),
                               ('9', 'not a compute capability')],
    'max-connections': [('many', 'not a count'), ('-1', 'not a count')],
}


def run(server, args, env):
    p = subprocess.run([server] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=10)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def parse_help(text):
    """[(letter or None, name, argument or None, help text)] in the order listed."""
    if not text.startswith('usage: cuda-remoted [options]\n'):
        raise Failure('--help does not start with the usage line:\n' + text)
    options = []
    for line in text.splitlines()[1:]:
        m = re.match(r'  (?:-(\w), |    )--([a-z][a-z0-9-]*)(?: ([A-Z.]+))?(?:\s+(.*))?$', line)
        if m:
            options.append([m.group(1), m.group(2), m.group(3), m.group(4) or ''])
        elif line.startswith(' ' * 10) and options:
            options[-1][3] += ' ' + line.strip()
        else:
            raise Failure('--help line neither an option nor its help: %r' % line)
    return [tuple(o) for o in options]


def option_args(flag, value):
    return [flag] if value is None else [flag, value]


def check_accepted(server, env, flag, value):
    """flag with value is taken: the parser goes on to the unknown option after it."""
    rc, _, err = run(server, option_args(flag, value) + [UNKNOWN], env)
    if rc != 2 or ("unrecognized option '%s'" % UNKNOWN) not in err or \
            re.search(r'^cuda-remoted: %s\b' % re.escape(flag), err, re.M):
        raise Failure('%s %s was not accepted (exit %d):\n%s' % (flag, value, rc, err))


def check_refused(server, env, name, value, why):
    rc, _, err = run(server, ['--' + name, value], env)
    want = 'cuda-remoted: --%s %s: %s' % (name, value, why)
    if rc != 2 or want not in err:
        raise Failure('--%s %s: exit %d, expected 2 and "%s":\n%s' % (name, value, rc, want, err))


def check_listed(server, env, tmp, listed):
    names = [o[1] for o in listed]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise Failure('--help lists these more than once: %s' % repeated)
    for needed in ('listen', 'backend', 'tenants', 'help'):
        if needed not in names:
            raise Failure('--help does not list --%s' % needed)
    valid = valid_values(tmp)
    unknown = [n for n in names if n != 'help' and n not in valid]
    if unknown:
        raise Failure('--help lists options this test has no value for: %s' % unknown)
    gone = [n for n in valid if n not in names]
    if gone:
        raise Failure('--help no longer lists %s' % gone)
    for letter, name, arg, text in listed:
        if name == 'help':
            continue
        if (arg is None) != (valid[name] is None):
            raise Failure('--%s: --help says its argument is %s' % (name, arg))
        check_accepted(server, env, '--' + name, valid[name])
        if letter:
            check_accepted(server, env, '-' + letter, valid[name])
        m = re.search(r'default: ([^\s\]]+)\]', text)
        if m and not m.group(1).startswith('$'):
            check_accepted(server, env, '--' + name, m.group(1))
        m = re.search(r'\[(\d+) to (\d+)', text)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            check_accepted(server, env, '--' + name, str(lo))
            check_accepted(server, env, '--' + name, str(hi))
            why = 'not a count%s (%d to %d)' % (' of seconds' if arg == 'SECONDS' else '', lo, hi)
            check_refused(server, env, name, str(hi + 1), why)
            if lo > 0:
                check_refused(server, env, name, str(lo - 1), why)
        for value, why in INVALID.get(name, []):
            check_refused(server, env, name, value, why)
    # help texts may name other options: only ones that exist
    for _, name, _, text in listed:
        for other in re.findall(r'(?<![\w/])--([a-z][a-z0-9-]*)', text):
            if other not in names:
                raise Failure('--%s: its help names --%s, which --help does not list'
                              % (name, other))


def check_refusals(server, env):
    for args, why in (([UNKNOWN], "unrecognized option '%s'" % UNKNOWN),
                      (['--listen'], "option '--listen' requires an argument"),
                      (['--no-shm=yes'], "option '--no-shm' doesn't allow an argument"),
                      (['--backend', 'emu', 'stray'], 'cuda-remoted: unexpected argument stray')):
        rc, out, err = run(server, args, env)
        if rc != 2 or why not in err or 'usage: cuda-remoted' not in err or out:
            raise Failure('%s: exit %d, expected 2, "%s" and the usage on stderr:\n%s'
                          % (args, rc, why, err))
    rc, _, err = run(server, ['--listen', '127.0.0.1:0'] * 17, env)
    why = 'cuda-remoted: --listen 127.0.0.1:0: at most 16 addresses'
    if rc != 2 or why not in err:
        raise Failure('17 --listen: exit %d, expected 2 and "%s":\n%s' % (rc, why, err))


def check_start(server, env, tmp, listed):
    """Every listed option at once: the server starts and uses them."""
    valid = valid_values(tmp)
    args = []
    for _, name, _, _ in listed:
        if name != 'help':
            args += option_args('--' + name, valid[name])
    log_path = os.path.join(tmp, 'server.log')
    with open(log_path, 'w') as log:
        proc = subprocess.Popen([server] + args, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 10
        while True:
            with open(log_path) as f:
                text = f.read()
            if re.search(r'listening on \S+', text) and re.search(r'metrics on \S+', text):
                break
            if proc.poll() is not None or time.time() > deadline:
                raise Failure('the server with every option (%s) did not start:\n%s'
                              % (' '.join(args), text))
            time.sleep(0.02)
        for want in ('compute capability 8.6', '1024 MiB of device memory',
                     '(TLS 1.3, client certificates required)'):
            if want not in text:
                raise Failure('the server log does not say "%s":\n%s' % (want, text))
        if not os.path.exists(valid['emu-trace']):
            raise Failure('--emu-trace %s: no trace file' % valid['emu-trace'])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--server', required=True)
    opts = ap.parse_args()
    env = {k: v for k, v in os.environ.items()
           if k not in ('CUDA_REMOTE_LOG', 'CUDA_REMOTE_EMU_TRACE')}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, 'tenants.json'), 'w') as f:
            json.dump({'tenants': [{'name': 'alice', 'token': 'alice-token-0001'}]}, f)
        # a certificate for --tls-cert, its own CA for --tls-client-ca
        subprocess.run(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
                        'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=localhost',
                        '-keyout', os.path.join(tmp, 'key.pem'), '-out',
                        os.path.join(tmp, 'cert.pem')], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        try:
            rc, help_text, err = run(opts.server, ['--help'], env)
            if rc != 0 or err:
                raise Failure('--help: exit %d, stderr:\n%s' % (rc, err))
            if run(opts.server, ['-h'], env)[1] != help_text:
                raise Failure('-h does not print what --help prints')
            listed = parse_help(help_text)
            check_listed(opts.server, env, tmp, listed)
            check_refusals(opts.server, env)
            check_start(opts.server, env, tmp, listed)
        except Failure as e:
            print('FAIL: %s' % e)
            return 1
    print('ok: %d options, each listed once and taken as listed' % len(listed))
    return 0


if __name__ == '__main__':
    sys.exit(main())
