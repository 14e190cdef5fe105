/* The CUDA runtime's "integrity check": cudart fetches export table d4082055-bde6-704b-
 * 8d34-ba123c66e1f2 from the driver and calls slot 1 as
 *     CUresult check(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
 * with version 13000, 13001 and 13002; a wrong out[] makes it fail with error 103. The
 * stub answers with this file.
 *
 * The algorithm is described publicly by the ZLUDA project (github.com/vosen/ZLUDA,
 * dark_api/src/lib.rs: integrity_check and its passes; zluda/src/impl/driver.rs shows the
 * inputs). This is an independent C implementation of that description, in these terms:
 *
 *   version % 10 == 0 or 1: a fixed answer (CR_INTEGRITY_FIXED*).
 *   otherwise: out = HMAC-MD2(K, message), K being a constant 16-byte key and message
 *   the 48-byte header (driver version, version, pid, thread, runtime table address,
 *   integrity table address, check function address, time) followed by 28 bytes per
 *   device (uuid, pci domain, bus, device), every field little-endian; out[0] and out[1]
 *   are the first and last 8 digest bytes read as little-endian integers.
 *
 * HMAC over MD2 with a key exactly one MD2 block long is
 *   MD2((K ^ 0x36..) || message) -> inner;  MD2((K ^ 0x5c..) || inner) -> digest. */
#include "integrity.h"

#include <string.h>

_Static_assert(sizeof(void *) == 8, "the hashed header assumes 64-bit addresses");
_Static_assert(sizeof(cr_md2_t) == 66, "cr_md2_t must have no padding");

/* MD2's substitution table (RFC 1319, section 3.2; built from the digits of pi). */
static const uint8_t md2_s[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,
    243, 192, 199, 115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212,
    224, 22,  103, 66,  111, 24,  138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160,
    251, 245, 142, 187, 47,  238, 122, 169, 104, 121, 145, 21,  178, 7,   63,  148, 194, 16,  137,
    11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,  53,  62,  204, 231, 191, 247, 151,
    3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,  170, 198, 79,  184,
    56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,  100,
    113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246,
    28,  70,  97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249,
    206, 186, 197, 234, 38,  44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129,
    77,  82,  106, 220, 55,  200, 108, 193, 171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120,
    136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254, 59,  0,   29,  57,  242, 239, 183, 14,
    102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,  80,  180, 143, 237, 31,
    26,  219, 153, 141, 51,  159, 17,  131, 20,
};

/* The HMAC key: constant (ZLUDA notes the driver derives it from no input). */
static const uint8_t integrity_key[16] = {
    0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
};

void cr_md2_init(cr_md2_t *md)
{
    memset(md, 0, sizeof *md);
}

/* MD2 compression: 18 rounds over the 48-byte state once a block is complete. */
static void md2_compress(cr_md2_t *md)
{
    uint8_t t = 0;
    for (unsigned round = 0; round < 18; round++) {
        for (unsigned k = 0; k < 48; k++)
            t = md->x[k] ^= md2_s[t];
        t = (uint8_t)(t + round);
    }
}

/* Byte at a time: place the byte in the block (and XORed with the chaining state), fold
 * it into the checksum, and compress when 16 bytes have arrived. */
void cr_md2_update(cr_md2_t *md, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        uint8_t n = md->count, b = p[i];
        md->x[16 + n] = b;
        md->x[32 + n] = (uint8_t)(md->x[n] ^ b);
        md->checksum[n] ^= md2_s[(uint8_t)(b ^ md->last)];
        md->last = md->checksum[n];
        md->count = (uint8_t)((n + 1) & 15);
        if (md->count == 0)
            md2_compress(md);
    }
}

/* Padding of 1..16 bytes, each equal to the pad length, then the checksum as one more
 * block (a snapshot: appending it changes the running checksum). */
void cr_md2_final(cr_md2_t *md, uint8_t digest[16])
{
    uint8_t pad[16], sum[16];
    uint8_t n = (uint8_t)(16 - md->count);
    memset(pad, n, n);
    cr_md2_update(md, pad, n);
    memcpy(sum, md->checksum, 16);
    cr_md2_update(md, sum, 16);
    memcpy(digest, md->x, 16);
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Header, 48 bytes: u32 driver version, u32 version argument, u32 pid, u32 thread,
 * u64 runtime table, u64 integrity table, u64 check function, u64 seconds. Note the
 * runtime table comes before the integrity table. */
static void build_header(const cr_integrity_input_t *in, uint32_t version_arg,
                         uint8_t h[CR_INTEGRITY_HEADER_SIZE])
{
    put_le32(h + 0, in->driver_version);
    put_le32(h + 4, version_arg);
    put_le32(h + 8, in->pid);
    put_le32(h + 12, in->thread_id);
    put_le64(h + 16, (uint64_t)(uintptr_t)in->runtime_table);
    put_le64(h + 24, (uint64_t)(uintptr_t)in->integrity_table);
    put_le64(h + 32, (uint64_t)(uintptr_t)in->check_function);
    put_le64(h + 40, in->unix_seconds);
}

/* Device, 28 bytes: the 16 uuid bytes as they are, then i32 pci domain, bus, device. */
static void build_device(const cr_integrity_device_t *dev, uint8_t d[CR_INTEGRITY_DEVICE_SIZE])
{
    memcpy(d, dev->uuid, 16);
    put_le32(d + 16, (uint32_t)dev->pci_domain);
    put_le32(d + 20, (uint32_t)dev->pci_bus);
    put_le32(d + 24, (uint32_t)dev->pci_device);
}

size_t cr_integrity_message(const cr_integrity_input_t *in, uint32_t version_arg, uint8_t *buf,
                            size_t cap)
{
    size_t size = CR_INTEGRITY_HEADER_SIZE + (size_t)in->device_count * CR_INTEGRITY_DEVICE_SIZE;
    if (!buf || cap < size)
        return size;
    build_header(in, version_arg, buf);
    for (uint32_t i = 0; i < in->device_count; i++)
        build_device(&in->devices[i],
                     buf + CR_INTEGRITY_HEADER_SIZE + (size_t)i * CR_INTEGRITY_DEVICE_SIZE);
    return size;
}

int cr_integrity_compute(const cr_integrity_input_t *in, uint32_t version_arg, uint64_t out[2])
{
    if (!in || !out || (in->device_count && !in->devices))
        return -1;

    /* Versions ending in 0 and 1 get constant answers; the rest are hashed. */
    if (version_arg % 10 == 0) {
        out[0] = CR_INTEGRITY_FIXED0_LO;
        out[1] = CR_INTEGRITY_FIXED0_HI;
        return 0;
    }
    if (version_arg % 10 == 1) {
        out[0] = CR_INTEGRITY_FIXED1_LO;
        out[1] = CR_INTEGRITY_FIXED1_HI;
        return 0;
    }

    uint8_t pad[16], header[CR_INTEGRITY_HEADER_SIZE], dev[CR_INTEGRITY_DEVICE_SIZE];
    uint8_t inner[16], digest[16];
    cr_md2_t md;

    /* Inner hash: key ^ 0x36, header, devices in order. */
    for (int i = 0; i < 16; i++)
        pad[i] = integrity_key[i] ^ 0x36;
    cr_md2_init(&md);
    cr_md2_update(&md, pad, sizeof pad);
    build_header(in, version_arg, header);
    cr_md2_update(&md, header, sizeof header);
    for (uint32_t i = 0; i < in->device_count; i++) {
        build_device(&in->devices[i], dev);
        cr_md2_update(&md, dev, sizeof dev);
    }
    cr_md2_final(&md, inner);

    /* Outer hash: key ^ 0x5c, inner digest. */
    for (int i = 0; i < 16; i++)
        pad[i] = integrity_key[i] ^ 0x5c;
    cr_md2_init(&md);
    cr_md2_update(&md, pad, sizeof pad);
    cr_md2_update(&md, inner, sizeof inner);
    cr_md2_final(&md, digest);

    /* The 16 digest bytes are the two u64 results, little-endian. */
    out[0] = get_le64(digest);
    out[1] = get_le64(digest + 8);
    return 0;
}
