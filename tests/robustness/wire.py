"""The wire protocol spoken by hand, for tests that play a hostile or unusual client:
frames, just enough msgpack, a connection that says hello and makes calls."""
import os
import socket
import struct

HEADER = struct.Struct('<IHHIIQQ')
MAGIC, VERSION = 0x544D5243, 1
FRAME_REPLY, FRAME_ASYNC = 1, 2
SUCCESS, INVALID_VALUE, INVALID_HANDLE, NOT_SUPPORTED = 0, 1, 400, 801
CLIENT_ID_BASE = 1 << 62


class Failure(Exception):
    pass


def pack(v):
    if v is None:
        return b'\xc0'
    if v is True:
        return b'\xc3'
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if v < 0:
            return b'\xd3' + struct.pack('>q', v)
        return b'\xcf' + struct.pack('>Q', v)
    if isinstance(v, str):
        b = v.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b'\xd9' + bytes([len(b)])) + b
    if isinstance(v, bytes):
        return b'\xc6' + struct.pack('>I', len(v)) + v
    if isinstance(v, list):
        head = bytes([0x90 | len(v)]) if len(v) < 16 else b'\xdc' + struct.pack('>H', len(v))
        return head + b''.join(pack(x) for x in v)
    if isinstance(v, dict):
        return bytes([0x80 | len(v)]) + b''.join(pack(k) + pack(x) for k, x in v.items())
    raise TypeError(v)


def reply_ints(body):
    """The leading integers of a reply array: the CUresult, then integer outputs (signed
    ones too)."""
    assert body[0] & 0xf0 == 0x90 or body[0] in (0xdc, 0xdd), body[:8]
    pos = 1 if body[0] & 0xf0 == 0x90 else (3 if body[0] == 0xdc else 5)
    values = []
    while pos < len(body):
        t = body[pos]
        if t < 0x80:
            values.append(t)
            pos += 1
        elif t >= 0xe0:  # negative fixint
            values.append(t - 0x100)
            pos += 1
        elif t in (0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3):
            n = 1 << (t & 3)
            values.append(int.from_bytes(body[pos + 1:pos + 1 + n], 'big', signed=t >= 0xd0))
            pos += 1 + n
        else:
            break
    return values


def read_opcodes(path):
    """Opcode numbers from codegen/opcodes.txt: line numbers among the entries."""
    ops, n = {}, 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith('#'):
                n += 1
                ops[line] = n
    return ops


def expect(what, got, want):
    if got != want:
        raise Failure('%s: got %r, expected %r' % (what, got, want))
    print('ok: %s' % what)


class Client:
    def __init__(self, path, opcodes, token=None, expect_refusal=False, sock=None):
        """path: the server's Unix socket; or sock: a connected socket (TLS, say)."""
        self.op = opcodes
        if sock is None:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(path)
        self.sock = sock
        self.sock.settimeout(10)
        self.call_id = 0
        self.last_bulk = b''
        hello = {'protocol': '1', 'cuda_version': 13000, 'client': 'wire.py',
                 'pid': str(os.getpid()), 'host': 'test', 'program': 'wire.py',
                 'token': token}
        self.hello = self.call('@hello', hello)
        if not expect_refusal:
            assert self.hello[0] == SUCCESS, self.hello

    def send(self, opcode, body, fds=(), flags=0, bulk=b''):
        self.call_id += 1
        data = pack(body)
        frame = HEADER.pack(MAGIC, VERSION, self.op[opcode], flags, len(data), self.call_id,
                            len(bulk)) + data + bulk
        if fds:
            socket.send_fds(self.sock, [frame], list(fds))
        else:
            self.sock.sendall(frame)
        return self.call_id

    def send_async(self, opcode, body, bulk=b''):
        self.send(opcode, body, flags=FRAME_ASYNC, bulk=bulk)

    def reply(self, call_id):
        """The reply's leading integers; its bulk bytes (all frames) in last_bulk."""
        self.last_bulk = b''
        while True:
            head = self._read(HEADER.size)
            magic, _, _, flags, body_len, got_id, bulk_len = HEADER.unpack(head)
            body = self._read(body_len)
            bulk = self._read(bulk_len)
            if flags & FRAME_REPLY and got_id == call_id:
                self.last_bulk += bulk
                if not flags & 4:  # CR_FRAME_PARTIAL: more to come
                    self.last_body = body
                    return reply_ints(body)

    def call(self, opcode, body, fds=(), bulk=b''):
        return self.reply(self.send(opcode, body, fds, bulk=bulk))

    def _read(self, n):
        data = b''
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError('the server closed the connection')
            data += chunk
        return data


def unpack(b, pos=0):
    """One msgpack value of the kinds replies use (integers and arrays): (value, next)."""
    t = b[pos]
    if t < 0x80:
        return t, pos + 1
    if t & 0xf0 == 0x90 or t in (0xdc, 0xdd):
        if t & 0xf0 == 0x90:
            n, pos = t & 0x0f, pos + 1
        else:
            size = 2 if t == 0xdc else 4
            n, pos = int.from_bytes(b[pos + 1:pos + 1 + size], 'big'), pos + 1 + size
        items = []
        for _ in range(n):
            v, pos = unpack(b, pos)
            items.append(v)
        return items, pos
    if t in (0xcc, 0xcd, 0xce, 0xcf):
        n = 1 << (t & 3)
        return int.from_bytes(b[pos + 1:pos + 1 + n], 'big'), pos + 1 + n
    if t >= 0xe0 or t in (0xd0, 0xd1, 0xd2, 0xd3):
        if t >= 0xe0:
            return t - 0x100, pos + 1
        n = 1 << (t & 3)
        return int.from_bytes(b[pos + 1:pos + 1 + n], 'big', signed=True), pos + 1 + n
    raise Failure('unexpected msgpack type %#x in a reply' % t)


def reply(c, op, body):
    """The whole reply array of a call."""
    c.call(op, body)
    return unpack(c.last_body)[0]
