#!/usr/bin/env python3
"""TLS: a real program over tls://, every way a TLS connection can be wrong refused with the
message that says so, mutual TLS with tenants known by their certificates, SIGHUP with a new
certificate, and the refusal of a plaintext listener other hosts can reach.

The CAs and certificates are made here, with the openssl command, in a temporary folder.

  tls_test.py --server BIN --stub DIR --tool BIN --opcodes codegen/opcodes.txt
              --program streams_static --bulk-program memory_static
              --quota-program tenant_quota_static

--bulk-program (copies of 1 B to 64 MiB, checked) runs once over TLS; --program (copies and
launches on several streams, checked) wherever a connection is expected to work.
"""
import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
sys.path.insert(0, os.path.join(HERE, '..', 'robustness'))
import run  # noqa: E402
from run import Failure  # noqa: E402
import wire  # noqa: E402
from wire import SUCCESS, Client, expect, read_opcodes  # noqa: E402

MiB = 1 << 20
BOB_TOKEN = 'bob-token-0002'


# --- certificates ----------------------------------------------------------------------------

def openssl(*argv, cwd):
    p = subprocess.run(['openssl'] + list(argv), cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise Failure('openssl %s failed:\n%s' % (' '.join(argv), p.stdout))


def make_ca(d, name):
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
            '-days', '3', '-subj', '/CN=cuda-remote test ' + name, '-keyout', name + '.key',
            '-out', name + '.pem', cwd=d)


def make_cert(d, name, ca, subject, san, dates=None):
    """A certificate for subject with the SANs san, signed by ca; dates (start, end) in
    openssl's YYYYMMDDHHMMSSZ make it valid then instead of from now on."""
    openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
            '-subj', subject, '-addext', 'subjectAltName=' + san, '-keyout', name + '.key',
            '-out', name + '.csr', cwd=d)
    if not dates:
        openssl('x509', '-req', '-in', name + '.csr', '-CA', ca + '.pem', '-CAkey', ca + '.key',
                '-CAcreateserial', '-days', '2', '-copy_extensions', 'copy', '-out',
                name + '.pem', cwd=d)
        return
    # only `openssl ca` sets dates in the past
    db = os.path.join(d, 'ca-db')
    os.makedirs(db, exist_ok=True)
    open(os.path.join(db, 'index.txt'), 'w').close()
    with open(os.path.join(db, 'serial'), 'w') as f:
        f.write('1000\n')
    with open(os.path.join(d, 'ca.cnf'), 'w') as f:
        f.write('[ca]\ndefault_ca = a\n[a]\ndatabase = %s/index.txt\nnew_certs_dir = %s\n'
                'serial = %s/serial\ndefault_md = sha256\npolicy = p\ncopy_extensions = copy\n'
                '[p]\ncommonName = supplied\n' % (db, db, db))
    openssl('ca', '-batch', '-config', 'ca.cnf', '-cert', ca + '.pem', '-keyfile', ca + '.key',
            '-in', name + '.csr', '-out', name + '.pem', '-notext', '-startdate', dates[0],
            '-enddate', dates[1], cwd=d)


def make_pki(d):
    make_ca(d, 'ca')
    make_ca(d, 'other-ca')
    make_cert(d, 'server', 'ca', '/CN=localhost', 'DNS:localhost,IP:127.0.0.1')
    make_cert(d, 'server-new', 'other-ca', '/CN=localhost', 'DNS:localhost,IP:127.0.0.1')
    make_cert(d, 'expired', 'ca', '/CN=localhost', 'DNS:localhost,IP:127.0.0.1',
              ('20200101000000Z', '20200102000000Z'))
    make_cert(d, 'alice', 'ca', '/CN=alice', 'DNS:alice.example')
    make_cert(d, 'bob', 'ca', '/CN=bob', 'DNS:bob.example')
    make_cert(d, 'forged-alice', 'other-ca', '/CN=alice', 'DNS:alice.example')


# --- clients ---------------------------------------------------------------------------------

class Env:
    def __init__(self, args, pki):
        self.args = args
        self.pki = pki

    def path(self, name):
        return os.path.join(self.pki, name)

    def tls_env(self, ca='ca', cert=None, name=None, token=None):
        extra = {'CUDA_REMOTE_TLS_CA': self.path(ca + '.pem')}
        if cert:
            extra['CUDA_REMOTE_TLS_CERT'] = self.path(cert + '.pem')
            extra['CUDA_REMOTE_TLS_KEY'] = self.path(cert + '.key')
        if name:
            extra['CUDA_REMOTE_TLS_SERVER_NAME'] = name
        if token:
            extra['CUDA_REMOTE_TOKEN'] = token
        return extra

    def program(self, address, extra, argv=None, timeout=60):
        env = run.client_env(self.args.stub, address, extra)
        for k in ('CUDA_REMOTE_TOKEN', 'CUDA_REMOTE_TLS_CA', 'CUDA_REMOTE_TLS_CERT',
                  'CUDA_REMOTE_TLS_KEY', 'CUDA_REMOTE_TLS_SERVER_NAME'):
            if k not in extra:
                env.pop(k, None)
        return run.run_program(argv or [self.args.program], env, timeout)

    def status(self, address, extra):
        env = dict(os.environ, CUDA_REMOTE_ADDR=address, **extra)
        return subprocess.run([self.args.tool, 'status', '--json'], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)

    def wire(self, server, ca='ca', cert=None, token=None):
        """A hand-spoken client over TLS (Python's ssl), trusting ca."""
        ctx = ssl.create_default_context(cafile=self.path(ca + '.pem'))
        if cert:
            ctx.load_cert_chain(self.path(cert + '.pem'), self.path(cert + '.key'))
        host, port = server.address.rsplit(':', 1)
        raw = socket.create_connection((host, int(port)), timeout=10)
        sock = ctx.wrap_socket(raw, server_hostname='localhost')
        return Client(None, read_opcodes(self.args.opcodes), token=token, sock=sock)


def refused(what, p, words):
    """p (a program run) failed, and its error says each of words."""
    if p.returncode == 0:
        raise Failure('%s: the program ran; it should have been refused' % what)
    for w in words:
        if w not in p.stderr:
            raise Failure('%s: the error does not say %r:\n%s' % (what, w, p.stderr))
    said = [x for x in p.stderr.splitlines() if words[0] in x][:1]
    print('ok: %s refused: %s' % (what, said[0].strip() if said else ''))


def runs(what, p):
    if p.returncode != 0:
        raise Failure('%s: exit %d\nstdout:\n%s\nstderr:\n%s' % (what, p.returncode, p.stdout,
                                                                  p.stderr))
    print('ok: %s: %s' % (what, p.stdout.strip().splitlines()[0] if p.stdout.strip() else ''))


def tls_address(server, host='localhost'):
    return 'tls://%s:%s' % (host, server.address.rsplit(':', 1)[1])


# --- scenarios -------------------------------------------------------------------------------

def check_tls(env, server):
    """Server with --tls-cert/--tls-key: one program right, then every way wrong."""
    address = tls_address(server)
    runs('copies of 1 B to 64 MiB over %s trusting the test CA' % address,
         env.program(address, env.tls_env(), [env.args.bulk_program], timeout=240))
    runs('streams over TLS', env.program(address, env.tls_env()))
    status = env.status(address, env.tls_env())
    expect('cuda-remote status over TLS', status.returncode, 0)
    mine = [s for s in json.loads(status.stdout)['sessions'] if 'cuda-remote' in s['who']]
    expect('status: how its own session authenticated', [s['auth'] for s in mine],
           ['nothing over TLS (no tenants file)'])
    refused('a client trusting another CA', env.program(address, env.tls_env(ca='other-ca')),
            ['TLS', 'unknown CA'])
    refused('a client expecting another name',
            env.program(address, env.tls_env(name='gpu.example')), ['name mismatch',
                                                                    'gpu.example'])
    refused('a plaintext client on the TLS listener', env.program(server.address, {}),
            ['speaks TLS', 'tls://'])
    p = subprocess.run(['openssl', 's_client', '-tls1_2', '-connect', server.address],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    if p.returncode == 0 or 'alert protocol version' not in p.stdout:
        raise Failure('a TLS 1.2-only client was not refused with a protocol-version alert:\n'
                      + p.stdout)
    server.wait_for('refused: TLS: not TLS 1.3')
    print('ok: a TLS 1.2-only client (openssl s_client -tls1_2) refused; the server says '
          '"not TLS 1.3"')
    runs('after the refusals, a good client still', env.program(address, env.tls_env()))


def check_reload(env, server, workdir):
    """SIGHUP with a new certificate: new connections see it, a running session goes on."""
    old = env.wire(server)
    expect('a session over TLS before the reload', old.call('cuMemGetInfo_v2', [True, True])[0],
           SUCCESS)
    for ext in ('pem', 'key'):
        os.replace(env.path('server-new.' + ext), os.path.join(workdir, 'server.' + ext))
    server.proc.send_signal(signal.SIGHUP)
    server.wait_for('TLS: certificate .* reloaded')
    address = tls_address(server)
    refused('after the reload, a client trusting only the old CA',
            env.program(address, env.tls_env()), ['unknown CA'])
    runs('after the reload, a client trusting the new CA',
         env.program(address, env.tls_env(ca='other-ca')))
    expect('the session from before the reload still served',
           old.call('cuMemGetInfo_v2', [True, True])[0], SUCCESS)
    print('ok: SIGHUP: new connections get the new certificate, the running session goes on')


def check_expired(env, server):
    refused('a server whose certificate has expired',
            env.program(tls_address(server), env.tls_env()), ['has expired'])


def check_plain_listener(env, server):
    refused('a TLS client on a plaintext listener',
            env.program(tls_address(server, '127.0.0.1'), env.tls_env()),
            ['TLS', 'may not speak TLS'])
    runs('a plaintext client on the same listener', env.program(server.address, {}))


def check_mutual(env, server):
    """--tls-client-ca with tenants: alice by certificate, bob by token."""
    address = tls_address(server)
    refused('no client certificate', env.program(address, env.tls_env()),
            ['no client certificate'])
    refused('a client certificate of an unknown CA',
            env.program(address, env.tls_env(cert='forged-alice')),
            ['does not trust our certificate'])
    quota = env.program(address, env.tls_env(cert='alice'),
                        [env.args.quota_program, 'check', str(256 * MiB)])
    runs("alice's certificate, no token: alice's 256 MiB quota", quota)
    refused("bob's certificate, no token (no tenant has it)",
            env.program(address, env.tls_env(cert='bob')), ['no tenant has the client '
                                                            'certificate CN=bob'])
    quota = env.program(address, env.tls_env(cert='bob', token=BOB_TOKEN),
                        [env.args.quota_program, 'check', str(128 * MiB)])
    runs("bob's certificate and bob's token: bob's 128 MiB quota", quota)
    refused("alice's certificate with bob's token",
            env.program(address, env.tls_env(cert='alice', token=BOB_TOKEN)),
            ['the token names tenant bob, the client certificate tenant alice'])
    held = env.wire(server, cert='alice')  # a session to see in status
    status = env.status(address, env.tls_env(cert='alice'))
    expect('cuda-remote status with a client certificate', status.returncode, 0)
    auths = sorted(s['auth'] for s in json.loads(status.stdout)['sessions'])
    expect("status: alice's sessions and how they authenticated", auths,
           ['certificate CN=alice over TLS'] * 2)
    server.wait_for('as tenant alice by certificate CN=alice over TLS')
    held.sock.close()
    print('ok: status and the log say how each session authenticated')


def check_listener_rules(args, workdir):
    """A plaintext TCP listener other hosts reach is refused at start, unless --insecure."""
    p = subprocess.run([args.server, '--backend', 'emu', '--listen', '0.0.0.0:0'],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    expect('a plaintext listener on 0.0.0.0: the exit status', p.returncode, 2)
    if '--insecure' not in p.stdout or '--tls-cert' not in p.stdout:
        raise Failure('the refusal does not say what to do:\n' + p.stdout)
    print('ok: --listen 0.0.0.0:0 refused: %s' % p.stdout.strip().splitlines()[-1])
    server = run.Server(args.server, workdir, 'tcp', extra=['--listen', '0.0.0.0:0',
                                                            '--insecure'])
    try:
        server.wait_for('listening on 0.0.0.0:\\d+ \\(plaintext\\)')
        print('ok: with --insecure it starts')
    finally:
        server.stop()


def check_tenants_file(args, workdir):
    """A tenants file's "cert": one per tenant, and a tenant needs a token or a cert."""
    cases = [([{'name': 'a', 'cert': 'CN=x'}, {'name': 'b', 'cert': 'CN=x'}],
              'tenants a and b share a cert'),
             ([{'name': 'a', 'memory': '1GiB'}], 'or the tenant needs a "cert"'),
             ([{'name': 'a', 'cert': 'O=x'}], '"cert" must be "CN=name", "DNS:name" or "URI:uri"')]
    path = os.path.join(workdir, 'bad-tenants.json')
    for tenants, says in cases:
        with open(path, 'w') as f:
            json.dump({'tenants': tenants}, f)
        p = subprocess.run([args.server, '--backend', 'emu', '--listen', '127.0.0.1:0',
                            '--tenants', path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        if p.returncode != 2 or says not in p.stdout:
            raise Failure('tenants %r: exit %d, expected 2 saying %r:\n%s' % (
                tenants, p.returncode, says, p.stdout))
    print('ok: tenants files with a shared, a missing or a malformed "cert" are refused')


def with_server(name, args, extra, test):
    """test(server) against a server listening on a Unix socket and on TCP (extra's
    --listen 127.0.0.1:0); server.address is the TCP one."""
    def wrapped(server):
        server.address = server.wait_for('listening on (127\\.0\\.0\\.1:\\d+)').group(1)
        test(server)
    return run.with_server(name, args.server, wrapped, extra=extra,
                           errors=(AssertionError, wire.Failure, OSError,
                                                  subprocess.SubprocessError))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--stub', required=True)
    ap.add_argument('--tool', required=True)
    ap.add_argument('--opcodes', required=True)
    ap.add_argument('--program', required=True)
    ap.add_argument('--bulk-program', required=True)
    ap.add_argument('--quota-program', required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix='cr-tls-') as pki:
        make_pki(pki)
        env = Env(args, pki)

        def tls(workdir, cert='server'):
            for ext in ('pem', 'key'):  # a copy: the reload test replaces it
                with open(env.path(cert + '.' + ext)) as src, \
                        open(os.path.join(workdir, 'server.' + ext), 'w') as dst:
                    dst.write(src.read())
            return ['--listen', '127.0.0.1:0', '--tls-cert', os.path.join(workdir, 'server.pem'),
                    '--tls-key', os.path.join(workdir, 'server.key')]

        def mutual(workdir):
            with open(os.path.join(workdir, 'tenants.json'), 'w') as f:
                json.dump({'tenants': [
                    {'name': 'alice', 'cert': 'CN=alice', 'memory': 256 * MiB},
                    {'name': 'bob', 'token': BOB_TOKEN, 'memory': 128 * MiB}]}, f)
            return tls(workdir) + ['--tls-client-ca', env.path('ca.pem'), '--tenants',
                                   os.path.join(workdir, 'tenants.json')]

        def tls_server(workdir):
            args_ = tls(workdir)
            tls_server.workdir = workdir
            return args_

        failed = 0
        failed |= with_server('tls', args, tls_server, lambda s: check_tls(env, s))
        failed |= with_server('tls.reload', args, tls_server,
                              lambda s: check_reload(env, s, tls_server.workdir))
        failed |= with_server('tls.expired', args, lambda w: tls(w, 'expired'),
                              lambda s: check_expired(env, s))
        failed |= with_server('tls.plain_listener', args, ['--listen', '127.0.0.1:0'],
                              lambda s: check_plain_listener(env, s))
        failed |= with_server('tls.mutual', args, mutual, lambda s: check_mutual(env, s))
        with tempfile.TemporaryDirectory(prefix='cr-tls-listen-') as w:
            try:
                check_listener_rules(args, w)
                check_tenants_file(args, w)
            except (Failure, wire.Failure) as e:
                print('tls.listeners: FAILED: %s' % e, file=sys.stderr)
                failed = 1
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
