/* The driver's private export tables (cuGetExportTable) the project knows: one list for
 * the server, which asks its driver which of them it has and how large they are, and for
 * the stub, which serves them.
 *
 * X(name, has_size, emu_slots, sixteen UUID bytes in order)
 *   has_size   1 when slot 0 holds the table's size in bytes (every table but the
 *              context-local storage one)
 *   emu_slots  the table's size in slots as the emulated device declares it, 0 when it
 *              does not serve the table (then the stub answers CUDA_ERROR_NOT_FOUND, as a
 *              driver without it would); the sizes NVIDIA's driver 580 has. The `cuda`
 *              backend reports its driver's own.
 * Facts and sources: the cudart contract (docs) and the tests in tests/stub. 1734dc26 is
 * asked for by cuBLASLt's first GEMM (its bytes are also in NVRTC, nvJitLink and CUPTI); what
 * its slots do is not known, so the stub serves it only as every unknown slot. */
#ifndef CR_EXPORT_TABLES_H
#define CR_EXPORT_TABLES_H

#define CR_EXPORT_TABLES(X)                                                                        \
    X(ERROR_SINK, 1, 2, 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46,    \
      0x9e, 0x7c, 0x0d, 0xd9)                                                                      \
    X(RUNTIME, 1, 13, 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39,      \
      0x12, 0xfd, 0x9d, 0xf9)                                                                      \
    X(TOOLS_HOOKS, 1, 7, 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00,   \
      0x20, 0x0c, 0x0a, 0x66)                                                                      \
    X(TOOLS_TLS, 1, 4, 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7,     \
      0x8a, 0x3a, 0xec, 0xdc)                                                                      \
    X(CONTEXT_STORAGE, 0, 3, 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68,     \
      0xf3, 0x55, 0xd8, 0x95, 0x93)                                                                \
    X(CONTEXT_CHECKS, 1, 4, 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb,      \
      0xd5, 0x00, 0x6d, 0xfa, 0x7e)                                                                \
    X(INTEGRITY, 1, 3, 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12,     \
      0x3c, 0x66, 0xe1, 0xf2)                                                                      \
    X(TOOLS_CONTEXT, 1, 95, 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41,      \
      0xff, 0x73, 0x24, 0xc8, 0xf2)                                                                \
    X(TOOLS_MODULE, 1, 99, 0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, \
      0xaf, 0xf1, 0x99, 0x1e)                                                                      \
    X(UNKNOWN_69A28E9F, 1, 34, 0x69, 0xa2, 0x8e, 0x9f, 0x24, 0x49, 0x8b, 0x47, 0xb0, 0x30, 0xc5,   \
      0xda, 0x33, 0x0e, 0xa4, 0xe9)                                                                \
    X(UNKNOWN_1734DC26, 1, 17, 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0,   \
      0xf1, 0xe7, 0xdd, 0x8b, 0xca)

enum {
#define CR_EXPORT_TABLE_ENUM(name, has_size, emu_slots, ...) CR_EXPORT_##name,
    CR_EXPORT_TABLES(CR_EXPORT_TABLE_ENUM)
#undef CR_EXPORT_TABLE_ENUM
        CR_EXPORT_TABLE_COUNT
};

typedef struct {
    const char *name;
    int has_size;
    int emu_slots;
    unsigned char uuid[16];
} cr_export_table_desc_t;

/* The list as data, indexed by CR_EXPORT_<name>. */
static inline const cr_export_table_desc_t *cr_export_table_desc(int i)
{
    static const cr_export_table_desc_t known[CR_EXPORT_TABLE_COUNT] = {
#define CR_EXPORT_TABLE_ROW(name, has_size, emu_slots, ...)                                        \
    {#name, has_size, emu_slots, {__VA_ARGS__}},
        CR_EXPORT_TABLES(CR_EXPORT_TABLE_ROW)
#undef CR_EXPORT_TABLE_ROW
    };
    return i >= 0 && i < CR_EXPORT_TABLE_COUNT ? &known[i] : 0;
}

/* The stub serves at most this many slots of one table (the largest known is 95). */
#define CR_EXPORT_TABLE_MAX_SLOTS 256

#endif
