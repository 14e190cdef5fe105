#!/usr/bin/env python3
"""Independent reference for client/integrity.c (cudart's integrity check answer), and the
driver that compares the two.

    reference.py PATH/TO/test_integrity

Written from the description of the algorithm (ZLUDA, dark_api/src/lib.rs), not from the
C code, and built differently on purpose:
  - the MD2 S-box is derived here from the digits of pi, not copied as a table;
  - MD2 is computed RFC 1319 style over the whole message (pad, checksum, then blocks);
  - HMAC is Python's own hmac module, given MD2 as its hash;
  - the message is laid out with struct.pack.
The script checks its MD2 against RFC 1319, feeds a few hundred cases to
`test_integrity --stdin` and fails on any answer that differs.
"""
import hmac
import random
import struct
import subprocess
import sys


def pi_digits():
    """Decimal digits of pi, 3 1 4 1 5 ... (Gibbons' unbounded spigot)."""
    q, r, t, k, n, l = 1, 0, 1, 1, 3, 3
    while True:
        if 4 * q + r - t < n * t:
            yield n
            q, r, n = 10 * q, 10 * (r - n * t), (10 * (3 * q + r)) // t - 10 * n
        else:
            q, r, t, k, n, l = (q * k, (2 * q + r) * l, t * l, k + 1,
                                (q * (7 * k + 2) + r * l) // (t * l), l + 2)


def md2_sbox():
    """MD2's permutation of 0..255: a shuffle driven by the digits of pi (RFC 1319)."""
    digits = pi_digits()

    def below(n):
        # A uniform number in [0, n) from 1-3 digits, rejecting the biased top range.
        while True:
            x, y = next(digits), 10
            if n > 10:
                x, y = x * 10 + next(digits), 100
            if n > 100:
                x, y = x * 10 + next(digits), 1000
            if x < n * (y // n):
                return x % n

    s = list(range(256))
    for i in range(2, 257):
        j = below(i)
        s[j], s[i - 1] = s[i - 1], s[j]
    return s


S = md2_sbox()


class MD2:
    """Enough of a hashlib object for the hmac module."""
    digest_size = 16
    block_size = 16
    name = "md2"

    def __init__(self, data=b""):
        self._data = bytes(data)

    def update(self, data):
        self._data += bytes(data)

    def copy(self):
        return MD2(self._data)

    def digest(self):
        n = 16 - len(self._data) % 16
        msg = self._data + bytes([n]) * n
        # Checksum over the padded message (RFC 1319 3.2 with its erratum: XOR into C).
        c, last = [0] * 16, 0
        for off in range(0, len(msg), 16):
            for j in range(16):
                c[j] ^= S[msg[off + j] ^ last]
                last = c[j]
        msg += bytes(c)
        # 48-byte state; 18 rounds per block.
        x = [0] * 48
        for off in range(0, len(msg), 16):
            block = msg[off:off + 16]
            for j in range(16):
                x[16 + j] = block[j]
                x[32 + j] = x[j] ^ block[j]
            t = 0
            for rnd in range(18):
                for k in range(48):
                    x[k] ^= S[t]
                    t = x[k]
                t = (t + rnd) % 256
        return bytes(x[:16])

    def hexdigest(self):
        return self.digest().hex()


KEY = bytes.fromhex("146addae53a9a752aa0841360bf55a9f")
FIXED = {0: (0x3341181C03CB675C, 0x8ED383AA1F4CD1E8),
         1: (0x1841181C03CB675C, 0x8ED383AA1F4CD1E8)}


def answer(case):
    """out[0], out[1] for one case (a dict, see random_case)."""
    if case["version"] % 10 in FIXED:
        return FIXED[case["version"] % 10]
    msg = struct.pack("<IIIIQQQQ", case["driver"], case["version"], case["pid"],
                      case["thread"], case["runtime"], case["integrity"], case["function"],
                      case["seconds"])
    for uuid, domain, bus, device in case["devices"]:
        msg += struct.pack("<16siii", uuid, domain, bus, device)
    mac = hmac.new(KEY, msg, MD2).digest()
    return struct.unpack("<QQ", mac)


def to_line(case):
    f = [case[k] for k in ("version", "driver", "pid", "thread", "runtime", "integrity",
                           "function", "seconds")]
    parts = ["%x" % v for v in f] + ["%x" % len(case["devices"])]
    for uuid, domain, bus, device in case["devices"]:
        parts += [uuid.hex()] + ["%x" % (v & 0xFFFFFFFF) for v in (domain, bus, device)]
    return " ".join(parts)


def random_case(rng):
    def addr():
        return 0x7F0000000000 | (rng.getrandbits(36) << 4)

    ndev = rng.choice([0, 1, 1, 1, 2, 3, 4, 8, 16])
    return {
        "version": rng.choice([13002, 13002, 12082, 13012, 13003, 13009,
                               rng.getrandbits(32)]),
        "driver": rng.choice([13000, 12080, 12090, rng.getrandbits(32)]),
        "pid": rng.getrandbits(rng.choice([16, 22, 32])),
        "thread": rng.getrandbits(32),
        "runtime": addr(),
        "integrity": addr(),
        "function": addr(),
        "seconds": rng.choice([1760000000 + rng.getrandbits(24), rng.getrandbits(64)]),
        "devices": [(rng.randbytes(16), rng.choice([0, 0, 1, rng.getrandbits(16)]),
                     rng.randrange(256), rng.choice([0, 0, rng.randrange(32), -1]))
                    for _ in range(ndev)],
    }


def cases():
    rng = random.Random(0x13002)
    out = [random_case(rng) for _ in range(300)]
    # The inputs of ZLUDA's published header example, with and without a device.
    zl = {"version": 12082, "driver": 0x2F30, "pid": 0x2FA423, "thread": 0xF79C1000,
          "runtime": 0x7FFFF6958240, "integrity": 0x7FFFF6958220,
          "function": 0x7FFFF2AAF4A0, "seconds": 0x682B9CEE, "devices": []}
    out.append(zl)
    out.append(dict(zl, devices=[(struct.pack("<4I", 0x8A2BFE9A, 0x382D25AC, 0xC5AE37EA,
                                              0x5F32716D), 0, 2, 0)]))
    # Fixed-answer versions.
    out.append(dict(zl, version=13000))
    out.append(dict(zl, version=13001))
    return out


def self_test():
    rfc1319 = {
        b"": "8350e5a3e24c153df2275c9f80692773",
        b"a": "32ec01ec4a6dac72c0ab96fb34c0b5d1",
        b"abc": "da853b0d3f88d99b30283a69e6ded6bb",
        b"message digest": "ab4f496bfb2a530b219ff33031fe06b0",
        b"abcdefghijklmnopqrstuvwxyz": "4e8ddff3650292ab5a4108c3aa47940b",
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789":
            "da33def2a42df13975352846c30338cd",
        b"1234567890" * 8: "d5976f79d83d3a0dc9806c3c66f3efd8",
    }
    ok = True
    for msg, want in rfc1319.items():
        got = MD2(msg).hexdigest()
        if got != want:
            print("reference MD2(%r) = %s, expected %s" % (msg, got, want))
            ok = False
    return ok


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if not self_test():
        return 1
    all_cases = cases()
    proc = subprocess.run([sys.argv[1], "--stdin"], input="".join(to_line(c) + "\n"
                                                                 for c in all_cases),
                          capture_output=True, text=True, timeout=60)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != len(all_cases):
        print("test_integrity --stdin: rc %d, %d lines for %d cases\n%s" %
              (proc.returncode, len(lines), len(all_cases), proc.stderr))
        return 1
    failures = 0
    for case, line in zip(all_cases, lines):
        want = "%016x %016x" % answer(case)
        if line.strip() != want:
            failures += 1
            if failures <= 10:
                print("mismatch for %s\n  C:      %s\n  Python: %s" % (to_line(case), line,
                                                                     want))
    print("%d cases, %d mismatches" % (len(all_cases), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
