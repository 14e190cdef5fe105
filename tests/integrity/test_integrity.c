/* Tests for client/integrity.c, the answer to cudart's integrity check.
 *
 * Without arguments: unit tests.
 *   - MD2 against the RFC 1319 test suite.
 *   - MD2 state after each step against the intermediate states published with ZLUDA's
 *     description of the algorithm (dark_api/src/lib.rs, its tests): one byte, the inner
 *     key block, the 48-byte header, one device record, the finalisation. These pin the
 *     byte layout of the header and the device record, not only the hash.
 *   - Two end-to-end answers computed by reference.py.
 *   - The fixed answers for versions ending in 0 and 1.
 *   - Every input changes the hashed answer.
 * With --stdin: reads one case a line and prints the answer, for reference.py (which
 *   checks the C answers against an independent Python implementation). */
#include "check.h"
#include "integrity.h"

#include <stdlib.h>

/* ---- MD2 known answers (RFC 1319, appendix A.5) ---- */

static void md2_hex(const char *msg, char hex[33])
{
    cr_md2_t md;
    uint8_t d[16];
    cr_md2_init(&md);
    cr_md2_update(&md, msg, strlen(msg));
    cr_md2_final(&md, d);
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static void test_md2_rfc1319(void)
{
    static const char *const cases[][2] = {
        {"", "8350e5a3e24c153df2275c9f80692773"},
        {"a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"},
        {"abc", "da853b0d3f88d99b30283a69e6ded6bb"},
        {"message digest", "ab4f496bfb2a530b219ff33031fe06b0"},
        {"abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "da33def2a42df13975352846c30338cd"},
        {"1234567890123456789012345678901234567890123456789012345678901234567890123456789"
         "0",
         "d5976f79d83d3a0dc9806c3c66f3efd8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char hex[33];
        md2_hex(cases[i][0], hex);
        CHECK_EQ_STR(hex, cases[i][1]);
    }
    /* Byte-at-a-time and all-at-once give the same digest. */
    const char *msg = "1234567890123456789012345678901234567890";
    cr_md2_t a, b;
    uint8_t da[16], db[16];
    cr_md2_init(&a);
    cr_md2_init(&b);
    cr_md2_update(&a, msg, strlen(msg));
    for (size_t i = 0; i < strlen(msg); i++)
        cr_md2_update(&b, msg + i, 1);
    cr_md2_final(&a, da);
    cr_md2_final(&b, db);
    CHECK_EQ_MEM(da, db, 16);
}

/* ---- Intermediate states from ZLUDA's published tests ---- */

static cr_md2_t state_of(const uint8_t bytes[66])
{
    cr_md2_t md;
    memcpy(&md, bytes, sizeof md);
    return md;
}

/* One byte (34) into a state with count 0: block byte, XOR byte, checksum, count. */
static void test_zluda_single_byte(void)
{
    static const uint8_t before[66] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x38, 0xc0, 0x9b, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xa3, 0x61, 0xe4, 0x42,
        0xf6, 0x67, 0x94, 0xff, 0x18, 0xc0, 0x9b, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xa4, 0x57,
        0x72, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    static const uint8_t after[66] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x22, 0xc0, 0x9b, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xa3, 0x61, 0xe4, 0x42,
        0xf6, 0x67, 0x94, 0xff, 0x22, 0xc0, 0x9b, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xa4, 0x57,
        0x72, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0x57, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x57,
    };
    cr_md2_t md = state_of(before);
    uint8_t b = 34;
    cr_md2_update(&md, &b, 1);
    CHECK_EQ_MEM(&md, after, 66);
}

/* State after the inner key block (key ^ 0x36) from a fresh state. */
static const uint8_t after_inner_key[66] = {
    0x8b, 0x21, 0x9a, 0x49, 0xe8, 0x6d, 0x1a, 0xee, 0xf2, 0x37, 0xf9, 0xb5, 0x4a, 0x8c,
    0x3c, 0x75, 0xc7, 0x1e, 0xee, 0x21, 0xcf, 0x29, 0x8a, 0xe5, 0x13, 0x83, 0xf4, 0xec,
    0x33, 0x04, 0xe2, 0xfd, 0xb0, 0x2f, 0x09, 0x01, 0x4f, 0xf7, 0x68, 0x6d, 0x69, 0x46,
    0x43, 0x7e, 0xb6, 0x2b, 0x21, 0xed, 0x57, 0xa1, 0x10, 0x86, 0x0e, 0x60, 0x44, 0x1e,
    0x70, 0x5f, 0x67, 0xd1, 0xeb, 0x67, 0xa1, 0x3d, 0x00, 0x3d,
};

static void test_zluda_inner_key(void)
{
    static const uint8_t key[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                    0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};
    uint8_t ipad[16];
    for (int i = 0; i < 16; i++)
        ipad[i] = key[i] ^ 0x36;
    cr_md2_t md;
    cr_md2_init(&md);
    cr_md2_update(&md, ipad, 16);
    CHECK_EQ_MEM(&md, after_inner_key, 66);
}

/* The header as cr_integrity_message lays it out, hashed after the inner key block. */
static void test_zluda_header(void)
{
    static const uint8_t after_header[66] = {
        0x0a, 0xfd, 0xab, 0xc9, 0xff, 0x9b, 0xa0, 0xbe, 0x4d, 0x30, 0x32, 0x82, 0x74, 0x4f,
        0xa7, 0x48, 0x9d, 0x23, 0x82, 0xa3, 0x87, 0xfa, 0x6c, 0xdb, 0x92, 0x49, 0xd9, 0xb5,
        0x4b, 0x2b, 0x5e, 0x51, 0x6e, 0xf7, 0xf9, 0x4d, 0x28, 0x8a, 0x64, 0x06, 0x19, 0xb3,
        0xe6, 0xbe, 0xa4, 0xec, 0x7e, 0x54, 0x64, 0x28, 0xd9, 0xe1, 0xd4, 0x34, 0xc0, 0xa9,
        0x49, 0x88, 0xc9, 0x61, 0x58, 0xdd, 0x66, 0x74, 0x00, 0x74,
    };
    cr_integrity_input_t in = {
        .driver_version = 0x2f30,
        .pid = 0x002fa423,
        .thread_id = 0xf79c1000,
        .runtime_table = (const void *)(uintptr_t)0x00007ffff6958240,
        .integrity_table = (const void *)(uintptr_t)0x00007ffff6958220,
        .check_function = (const void *)(uintptr_t)0x00007ffff2aaf4a0,
        .unix_seconds = 0x682b9cee,
    };
    uint8_t msg[CR_INTEGRITY_HEADER_SIZE];
    CHECK_EQ_INT(cr_integrity_message(&in, 12082, msg, sizeof msg), CR_INTEGRITY_HEADER_SIZE);
    cr_md2_t md = state_of(after_inner_key);
    cr_md2_update(&md, msg, sizeof msg);
    CHECK_EQ_MEM(&md, after_header, 66);
}

/* One device record (uuid, pci 0:2:0) as cr_integrity_message lays it out. */
static void test_zluda_device(void)
{
    static const uint8_t before[66] = {
        0x84, 0xfd, 0x93, 0x10, 0xc6, 0xdb, 0xb3, 0xbc, 0x49, 0xc2, 0x25, 0xe7, 0xda, 0x6e,
        0x22, 0x6f, 0x9b, 0xbd, 0x81, 0x59, 0xc3, 0x01, 0x9a, 0x7a, 0x26, 0x34, 0x39, 0x0f,
        0x2a, 0x56, 0x13, 0xb1, 0xf6, 0xbc, 0x7f, 0xa1, 0x8f, 0x04, 0xa5, 0x4d, 0x0d, 0x78,
        0xab, 0x20, 0xf8, 0x23, 0x20, 0xa5, 0x3f, 0x67, 0x36, 0xe2, 0xde, 0x8a, 0xe5, 0xdf,
        0xe1, 0xf2, 0x03, 0x94, 0xad, 0xdc, 0x9a, 0xda, 0x00, 0xda,
    };
    static const uint8_t after[66] = {
        0x1f, 0xd8, 0x25, 0xd2, 0xdf, 0xfa, 0x64, 0xc7, 0xb6, 0x1a, 0xaf, 0x22, 0xb8, 0x79,
        0xfb, 0x96, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x7c, 0x9d, 0x46, 0xd2, 0x1f, 0xd8, 0x25, 0xd2, 0xdd, 0xfa, 0x64, 0xc7, 0xb6, 0x1a,
        0xaf, 0x22, 0xe6, 0x17, 0xbd, 0x3a, 0xd7, 0xdd, 0x5f, 0x82, 0x8c, 0x87, 0xce, 0x86,
        0x66, 0xaf, 0xa0, 0x50, 0x7a, 0x7d, 0xbb, 0xbc, 0x0c, 0x50,
    };
    /* uuid given there as four little-endian u32s 8a2bfe9a 382d25ac c5ae37ea 5f32716d */
    cr_integrity_device_t dev = {
        .uuid = {0x9a, 0xfe, 0x2b, 0x8a, 0xac, 0x25, 0x2d, 0x38, 0xea, 0x37, 0xae, 0xc5, 0x6d, 0x71,
                 0x32, 0x5f},
        .pci_domain = 0,
        .pci_bus = 2,
        .pci_device = 0,
    };
    cr_integrity_input_t in = {.devices = &dev, .device_count = 1};
    uint8_t msg[CR_INTEGRITY_HEADER_SIZE + CR_INTEGRITY_DEVICE_SIZE];
    CHECK_EQ_INT(cr_integrity_message(&in, 13002, msg, sizeof msg), sizeof msg);
    cr_md2_t md = state_of(before);
    cr_md2_update(&md, msg + CR_INTEGRITY_HEADER_SIZE, CR_INTEGRITY_DEVICE_SIZE);
    CHECK_EQ_MEM(&md, after, 66);
}

/* Finalisation: padding plus checksum block; the digest is the first 16 state bytes. */
static void test_zluda_final(void)
{
    static const uint8_t before[66] = {
        0x3e, 0x4b, 0xf2, 0x95, 0x71, 0xf5, 0x6b, 0x51, 0x07, 0xbf, 0x4b, 0xf1, 0x04, 0x0e,
        0x8e, 0x0b, 0x5f, 0x4d, 0x30, 0x0c, 0x0f, 0x0c, 0xae, 0xfb, 0x48, 0xaf, 0x23, 0xb5,
        0xea, 0x4c, 0xc2, 0xdb, 0xd7, 0xdf, 0x88, 0x74, 0x39, 0x58, 0x16, 0x3a, 0x1f, 0x7c,
        0x9b, 0x20, 0x7e, 0x7e, 0x94, 0xc8, 0x8b, 0xc6, 0xb2, 0x38, 0x0d, 0x07, 0x7d, 0xbd,
        0x90, 0xd5, 0x39, 0x63, 0xeb, 0x1d, 0x4f, 0x40, 0x00, 0x40,
    };
    static const uint8_t after[66] = {
        0x00, 0x23, 0x53, 0x06, 0x5e, 0x96, 0xf6, 0x9c, 0x61, 0xaa, 0x96, 0x2d, 0x2e, 0xcd,
        0xa8, 0x58, 0xe9, 0xca, 0xc0, 0x2e, 0x35, 0xed, 0x5f, 0xca, 0xe1, 0x0e, 0xcd, 0x1f,
        0xd0, 0x8e, 0x8b, 0x9c, 0x29, 0x4d, 0x1c, 0x94, 0x6b, 0xf7, 0x10, 0xb0, 0x07, 0x08,
        0x91, 0xd6, 0x14, 0x06, 0xc0, 0xec, 0xe1, 0x9c, 0x8e, 0x33, 0xd4, 0xe9, 0x43, 0x5c,
        0x86, 0x0c, 0x72, 0x4d, 0x27, 0x98, 0x91, 0x7f, 0x00, 0x7f,
    };
    cr_md2_t md = state_of(before);
    uint8_t digest[16];
    cr_md2_final(&md, digest);
    CHECK_EQ_MEM(digest, after, 16);
    CHECK_EQ_MEM(&md, after, 66);
}

/* ---- cr_integrity_compute ---- */

static const cr_integrity_device_t base_devices[2] = {
    {.uuid = {0x9a, 0xfe, 0x2b, 0x8a, 0xac, 0x25, 0x2d, 0x38, 0xea, 0x37, 0xae, 0xc5, 0x6d, 0x71,
              0x32, 0x5f},
     .pci_domain = 0,
     .pci_bus = 0x41,
     .pci_device = 0},
    {.uuid = {0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed,
              0xfe, 0x0f},
     .pci_domain = 1,
     .pci_bus = 0x81,
     .pci_device = 3},
};

static cr_integrity_input_t base_input(cr_integrity_device_t devs[2])
{
    memcpy(devs, base_devices, sizeof base_devices);
    cr_integrity_input_t in = {
        .driver_version = 13000,
        .pid = 4242,
        .thread_id = 0xf7a3c740,
        .runtime_table = (const void *)(uintptr_t)0x00007f12345678a0,
        .integrity_table = (const void *)(uintptr_t)0x00007f12345679c0,
        .check_function = (const void *)(uintptr_t)0x00007f1233001230,
        .unix_seconds = 1760000000,
        .devices = devs,
        .device_count = 2,
    };
    return in;
}

static void test_fixed_versions(void)
{
    cr_integrity_device_t devs[2];
    cr_integrity_input_t in = base_input(devs);
    uint64_t out[2];
    CHECK_EQ_INT(cr_integrity_compute(&in, 13000, out), 0);
    CHECK_EQ_U64(out[0], 0x3341181C03CB675C);
    CHECK_EQ_U64(out[1], 0x8ED383AA1F4CD1E8);
    CHECK_EQ_INT(cr_integrity_compute(&in, 13001, out), 0);
    CHECK_EQ_U64(out[0], 0x1841181C03CB675C);
    CHECK_EQ_U64(out[1], 0x8ED383AA1F4CD1E8);
    /* Only the last decimal digit selects them. */
    CHECK_EQ_INT(cr_integrity_compute(&in, 12080, out), 0);
    CHECK_EQ_U64(out[0], 0x3341181C03CB675C);
    in.pid++;
    CHECK_EQ_INT(cr_integrity_compute(&in, 12081, out), 0);
    CHECK_EQ_U64(out[0], 0x1841181C03CB675C);
    /* Hashed versions differ from the fixed answers and from each other. */
    uint64_t a[2], b[2];
    CHECK_EQ_INT(cr_integrity_compute(&in, 13002, a), 0);
    CHECK_EQ_INT(cr_integrity_compute(&in, 13003, b), 0);
    CHECK(a[0] != 0x3341181C03CB675C && a[0] != 0x1841181C03CB675C);
    CHECK(a[0] != b[0] || a[1] != b[1]);
    /* Bad arguments. */
    CHECK_EQ_INT(cr_integrity_compute(NULL, 13002, out), -1);
    CHECK_EQ_INT(cr_integrity_compute(&in, 13002, NULL), -1);
    in.devices = NULL;
    CHECK_EQ_INT(cr_integrity_compute(&in, 13002, out), -1);
    in.device_count = 0;
    CHECK_EQ_INT(cr_integrity_compute(&in, 13002, out), 0);
}

/* End to end, ZLUDA's header example with no device and with its device; the expected
 * answers come from reference.py (independent Python implementation). */
static void test_end_to_end(void)
{
    cr_integrity_device_t dev = {
        .uuid = {0x9a, 0xfe, 0x2b, 0x8a, 0xac, 0x25, 0x2d, 0x38, 0xea, 0x37, 0xae, 0xc5, 0x6d, 0x71,
                 0x32, 0x5f},
        .pci_domain = 0,
        .pci_bus = 2,
        .pci_device = 0,
    };
    cr_integrity_input_t in = {
        .driver_version = 0x2f30,
        .pid = 0x002fa423,
        .thread_id = 0xf79c1000,
        .runtime_table = (const void *)(uintptr_t)0x00007ffff6958240,
        .integrity_table = (const void *)(uintptr_t)0x00007ffff6958220,
        .check_function = (const void *)(uintptr_t)0x00007ffff2aaf4a0,
        .unix_seconds = 0x682b9cee,
        .devices = &dev,
        .device_count = 0,
    };
    uint64_t out[2];
    CHECK_EQ_INT(cr_integrity_compute(&in, 12082, out), 0);
    CHECK_EQ_U64(out[0], 0xd22dfa4f5eef7907);
    CHECK_EQ_U64(out[1], 0xfa7b90d103755207);
    in.device_count = 1;
    CHECK_EQ_INT(cr_integrity_compute(&in, 12082, out), 0);
    CHECK_EQ_U64(out[0], 0xf7ce26b071a14844);
    CHECK_EQ_U64(out[1], 0xdd021b05393e8c6c);
}

/* Deterministic: same input, same answer. */
static void test_deterministic(void)
{
    cr_integrity_device_t d1[2], d2[2];
    cr_integrity_input_t a = base_input(d1), b = base_input(d2);
    uint64_t oa[2], ob[2];
    cr_integrity_compute(&a, 13002, oa);
    cr_integrity_compute(&b, 13002, ob);
    CHECK_EQ_U64(oa[0], ob[0]);
    CHECK_EQ_U64(oa[1], ob[1]);
}

enum {
    F_DRIVER,
    F_VERSION,
    F_PID,
    F_THREAD,
    F_RUNTIME,
    F_INTEGRITY,
    F_FUNCTION,
    F_TIME,
    F_COUNT,
    F_UUID0,
    F_UUID15,
    F_DOMAIN,
    F_BUS,
    F_DEVICE,
    F_DEV1_UUID,
    F_DEV1_BUS,
    F_ORDER,
    F_N
};

/* The answer for the base input with one field changed. */
static void answer_with(int field, uint64_t out[2])
{
    cr_integrity_device_t devs[2];
    cr_integrity_input_t in = base_input(devs);
    uint32_t version = 13002;
    switch (field) {
    case F_DRIVER:
        in.driver_version = 13010;
        break;
    case F_VERSION:
        version = 13012;
        break;
    case F_PID:
        in.pid ^= 1;
        break;
    case F_THREAD:
        in.thread_id ^= 0x100;
        break;
    case F_RUNTIME:
        in.runtime_table = (const char *)in.runtime_table + 8;
        break;
    case F_INTEGRITY:
        in.integrity_table = (const char *)in.integrity_table + 8;
        break;
    case F_FUNCTION:
        in.check_function = (const char *)in.check_function + 16;
        break;
    case F_TIME:
        in.unix_seconds += 1;
        break;
    case F_COUNT:
        in.device_count = 1;
        break;
    case F_UUID0:
        devs[0].uuid[0] ^= 1;
        break;
    case F_UUID15:
        devs[0].uuid[15] ^= 0x80;
        break;
    case F_DOMAIN:
        devs[0].pci_domain = 1;
        break;
    case F_BUS:
        devs[0].pci_bus += 1;
        break;
    case F_DEVICE:
        devs[0].pci_device = 1;
        break;
    case F_DEV1_UUID:
        devs[1].uuid[7] ^= 4;
        break;
    case F_DEV1_BUS:
        devs[1].pci_bus = 0x82;
        break;
    case F_ORDER:
        devs[0] = base_devices[1];
        devs[1] = base_devices[0];
        break;
    default:
        break;
    }
    CHECK_EQ_INT(cr_integrity_compute(&in, version, out), 0);
}

static void test_every_input_matters(void)
{
    uint64_t base[2], outs[F_N][2];
    answer_with(-1, base);
    for (int f = 0; f < F_N; f++) {
        answer_with(f, outs[f]);
        if (outs[f][0] == base[0] && outs[f][1] == base[1])
            fprintf(stderr, "field %d does not change the answer\n", f);
        CHECK(outs[f][0] != base[0] || outs[f][1] != base[1]);
    }
    /* And no two changes collide. */
    for (int f = 0; f < F_N; f++)
        for (int g = f + 1; g < F_N; g++)
            CHECK(outs[f][0] != outs[g][0] || outs[f][1] != outs[g][1]);
}

/* Message layout: size and the position of a few fields. */
static void test_message_layout(void)
{
    cr_integrity_device_t devs[2];
    cr_integrity_input_t in = base_input(devs);
    uint8_t msg[CR_INTEGRITY_HEADER_SIZE + 2 * CR_INTEGRITY_DEVICE_SIZE];
    CHECK_EQ_INT(cr_integrity_message(&in, 13002, NULL, 0), sizeof msg);
    CHECK_EQ_INT(cr_integrity_message(&in, 13002, msg, sizeof msg), sizeof msg);
    static const uint8_t head[16] = {0xc8, 0x32, 0, 0, 0xca, 0x32, 0,    0,
                                     0x92, 0x10, 0, 0, 0x40, 0xc7, 0xa3, 0xf7};
    CHECK_EQ_MEM(msg, head, 16);
    static const uint8_t rt[8] = {0xa0, 0x78, 0x56, 0x34, 0x12, 0x7f, 0, 0};
    CHECK_EQ_MEM(msg + 16, rt, 8);
    CHECK_EQ_MEM(msg + 48, devs[0].uuid, 16);
    CHECK_EQ_INT(msg[48 + 20], 0x41);
    CHECK_EQ_MEM(msg + 76, devs[1].uuid, 16);
    CHECK_EQ_INT(msg[76 + 16], 1);
    CHECK_EQ_INT(msg[76 + 20], 0x81);
    CHECK_EQ_INT(msg[76 + 24], 3);
}

/* ---- --stdin mode for reference.py ----
 * Line: version driver pid thread runtime integrity function seconds ndev, then per device
 * uuid(32 hex digits) domain bus device; every number in hex (pci fields as u32).
 * Output line: out0 out1 in hex, or "error". */
static int parse_hex(char **p, uint64_t *v)
{
    char *end;
    *v = strtoull(*p, &end, 16);
    if (end == *p)
        return -1;
    *p = end;
    return 0;
}

static int run_stdin(void)
{
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        char *p = line;
        uint64_t f[9];
        int bad = 0;
        for (int i = 0; i < 9 && !bad; i++)
            bad = parse_hex(&p, &f[i]);
        cr_integrity_device_t devs[16];
        if (!bad && f[8] > 16)
            bad = 1;
        for (uint64_t d = 0; !bad && d < f[8]; d++) {
            while (*p == ' ')
                p++;
            for (int k = 0; k < 16 && !bad; k++) {
                unsigned byte = 0;
                if (sscanf(p + 2 * k, "%2x", &byte) != 1)
                    bad = 1;
                devs[d].uuid[k] = (uint8_t)byte;
            }
            if (bad)
                break;
            p += 32;
            uint64_t dom = 0, bus = 0, dev = 0;
            bad = parse_hex(&p, &dom) || parse_hex(&p, &bus) || parse_hex(&p, &dev);
            devs[d].pci_domain = (int32_t)(uint32_t)dom;
            devs[d].pci_bus = (int32_t)(uint32_t)bus;
            devs[d].pci_device = (int32_t)(uint32_t)dev;
        }
        cr_integrity_input_t in = {
            .driver_version = (uint32_t)f[1],
            .pid = (uint32_t)f[2],
            .thread_id = (uint32_t)f[3],
            .runtime_table = (const void *)(uintptr_t)f[4],
            .integrity_table = (const void *)(uintptr_t)f[5],
            .check_function = (const void *)(uintptr_t)f[6],
            .unix_seconds = f[7],
            .devices = devs,
            .device_count = (uint32_t)f[8],
        };
        uint64_t out[2];
        if (bad || cr_integrity_compute(&in, (uint32_t)f[0], out) != 0)
            printf("error\n");
        else
            printf("%016" PRIx64 " %016" PRIx64 "\n", out[0], out[1]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--stdin") == 0)
        return run_stdin();
    test_md2_rfc1319();
    test_zluda_single_byte();
    test_zluda_inner_key();
    test_zluda_header();
    test_zluda_device();
    test_zluda_final();
    test_end_to_end();
    test_fixed_versions();
    test_deterministic();
    test_every_input_matters();
    test_message_layout();
    CHECK_DONE();
}
