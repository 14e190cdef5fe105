/* Emulated code: loading nvcc-built fatbins, cubins and PTX; kernels, globals and attributes;
 * launches checked like a device and recorded in the trace (parameter bytes compared byte for
 * byte); the interpreter hook; occupancy; bad handles.
 * Usage: test_emu_module <fixture dir> <trace file> */
#include <cjson/cJSON.h>

#include "emu_test.h"

#define ARENA (256ull << 20)

static const char *fixture_dir, *trace_path;

static void *read_file(const char *name, size_t *size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = calloc(1, (size_t)n + 1); /* NUL-terminated, for PTX */
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        exit(1);
    fclose(f);
    if (size)
        *size = (size_t)n;
    return buf;
}

/* Trace lines, parsed. */
static int trace_lines(cJSON **out, int max)
{
    FILE *f = fopen(trace_path, "rb");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int count = 0;
    while ((len = getline(&line, &cap, f)) > 0 && count < max) {
        out[count++] = cJSON_Parse(line);
    }
    free(line);
    fclose(f);
    return count;
}

static void to_hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    out[2 * n] = 0;
}

static long long json_int(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -999999;
}

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "(none)";
}

static void check_dims(const cJSON *o, const char *key, int x, int y, int z)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    CHECK(cJSON_IsArray(a) && cJSON_GetArraySize(a) == 3);
    if (cJSON_IsArray(a) && cJSON_GetArraySize(a) == 3) {
        CHECK_EQ_INT(cJSON_GetArrayItem(a, 0)->valueint, x);
        CHECK_EQ_INT(cJSON_GetArrayItem(a, 1)->valueint, y);
        CHECK_EQ_INT(cJSON_GetArrayItem(a, 2)->valueint, z);
    }
}

struct big {
    double v[6];
};

/* What the hook saw. */
static struct {
    pthread_mutex_t lock;
    int calls;
    int fail_next;
    char kernel[64];
    unsigned char params[128];
    uint32_t param_size;
    uint64_t counter_address;
    int code_kind;
} hook_seen = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int hook(const cr_emu_launch_t *l, void *user)
{
    uint64_t addr = 0, size = 0;
    (void)user;
    pthread_mutex_lock(&hook_seen.lock);
    hook_seen.calls++;
    snprintf(hook_seen.kernel, sizeof hook_seen.kernel, "%s", l->kernel);
    hook_seen.param_size = l->param_size;
    memcpy(hook_seen.params, l->params, l->param_size < 128 ? l->param_size : 128);
    if (cr_emu_launch_global(l, "dev_counter", &addr, &size) == 0 && size == 4)
        hook_seen.counter_address = addr;
    hook_seen.code_kind = l->code_kind;
    int fail = hook_seen.fail_next;
    hook_seen.fail_next = 0;
    pthread_mutex_unlock(&hook_seen.lock);
    return fail ? CR_EUNSUPPORTED : 0;
}

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    cr_emu_cuMemGetInfo_v2(&f, &t);
    return f;
}

/* Free memory once it reaches `expected`, or after two seconds whatever it is then. */
static size_t free_soon(size_t expected)
{
    size_t now = free_now();
    for (int i = 0; i < 200 && now != expected; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        now = free_now();
    }
    return now;
}

static void test_library(void)
{
    size_t size;
    void *fatbin = read_file("emu_sm90.fatbin", &size);
    /* cudart passes the wrapper nvcc puts in the host object */
    struct {
        uint32_t magic, version;
        const void *data, *filename;
    } wrapper = {0x466243B1u, 1, fatbin, NULL};
    CUlibraryOption opt = CU_LIBRARY_BINARY_IS_PRESERVED;
    void *val = (void *)(uintptr_t)1;
    CUlibrary lib, lib2;
    size_t free0 = free_now();
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, &wrapper, NULL, NULL, 0, &opt, &val, 1));
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib2, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(lib != lib2);
    CHECK(free_now() < free0); /* globals live in the arena */
    CHECK_CU(cr_emu_cuLibraryLoadData(&lib2, NULL, NULL, NULL, 0, NULL, NULL, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuLibraryLoadData(NULL, fatbin, NULL, NULL, 0, NULL, NULL, 0),
             CUDA_ERROR_INVALID_VALUE);

    unsigned count = 0;
    CHECK_OK(cr_emu_cuLibraryGetKernelCount(&count, lib));
    CHECK_EQ_INT(count, 6);
    CUkernel ks[6] = {0};
    CHECK_OK(cr_emu_cuLibraryEnumerateKernels(ks, 6, lib));
    for (int i = 0; i < 6; i++)
        CHECK(ks[i] != NULL);
    CUkernel mixed, vec_add, cpp, with_shared, bounded;
    CHECK_OK(cr_emu_cuLibraryGetKernel(&mixed, lib, "mixed"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&vec_add, lib, "vec_add"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&cpp, lib, "_Z10cpp_kernelPii"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&with_shared, lib, "with_shared"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&bounded, lib, "bounded"));
    CHECK_CU(cr_emu_cuLibraryGetKernel(&mixed, lib, "cpp_kernel"), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cr_emu_cuLibraryGetKernel(&mixed, (CUlibrary)0x1234, "mixed"),
             CUDA_ERROR_INVALID_HANDLE);
    const char *name = NULL;
    CHECK_OK(cr_emu_cuKernelGetName(&name, cpp));
    CHECK_EQ_STR(name, "_Z10cpp_kernelPii");
    CUfunction f_mixed;
    CHECK_OK(cr_emu_cuKernelGetFunction(&f_mixed, mixed));
    CHECK((void *)f_mixed != (void *)mixed);
    CHECK_OK(cr_emu_cuFuncGetName(&name, f_mixed));
    CHECK_EQ_STR(name, "mixed");
    CHECK_OK(cr_emu_cuFuncGetName(&name, (CUfunction)mixed)); /* a CUkernel as a CUfunction */
    CHECK_EQ_STR(name, "mixed");
    CUlibrary back;
    CHECK_OK(cr_emu_cuKernelGetLibrary(&back, mixed));
    CHECK(back == lib);
    CUmodule mod, fmod;
    CHECK_OK(cr_emu_cuLibraryGetModule(&mod, lib));
    CHECK_OK(cr_emu_cuFuncGetModule(&fmod, f_mixed));
    CHECK(mod == fmod);
    CUfunction f2;
    CHECK_OK(cr_emu_cuModuleGetFunction(&f2, mod, "mixed"));
    CHECK(f2 == f_mixed);
    CHECK_OK(cr_emu_cuModuleGetFunctionCount(&count, mod));
    CHECK_EQ_INT(count, 6);
    CUfunctionLoadingState state;
    CHECK_OK(cr_emu_cuFuncIsLoaded(&state, f_mixed));
    CHECK_EQ_INT(state, CU_FUNCTION_LOADING_STATE_LOADED);
    CHECK_OK(cr_emu_cuFuncLoad(f_mixed));

    /* parameter layout */
    static const size_t offsets[] = {0, 2, 8, 56, 64, 72}, sizes[] = {1, 2, 48, 8, 8, 8};
    for (size_t i = 0; i < 6; i++) {
        size_t off = 99, sz = 99;
        CHECK_OK(cr_emu_cuKernelGetParamInfo(mixed, i, &off, &sz));
        CHECK_EQ_U64(off, offsets[i]);
        CHECK_EQ_U64(sz, sizes[i]);
        CHECK_OK(cr_emu_cuFuncGetParamInfo(f_mixed, i, &off, &sz));
        CHECK_EQ_U64(off, offsets[i]);
    }
    size_t off;
    CHECK_CU(cr_emu_cuKernelGetParamInfo(mixed, 6, &off, NULL), CUDA_ERROR_INVALID_VALUE);

    /* globals: sizes and initial contents */
    CUdeviceptr g;
    size_t gsize;
    int counter = 0;
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&g, &gsize, lib, "dev_counter"));
    CHECK_EQ_U64(gsize, 4);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(&counter, g, 4));
    CHECK_EQ_INT(counter, 42);
    float table[4];
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&g, &gsize, lib, "dev_table"));
    CHECK_EQ_U64(gsize, 16);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(table, g, 16));
    CHECK(table[0] == 1.5f && table[1] == 2.5f && table[2] == 3.5f && table[3] == 4.5f);
    int consts[8];
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&g, &gsize, lib, "const_table"));
    CHECK_EQ_U64(gsize, 32);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(consts, g, 32));
    for (int i = 0; i < 8; i++)
        CHECK_EQ_INT(consts[i], 10 + i);
    long long pair[2];
    CHECK_OK(cr_emu_cuModuleGetGlobal_v2(&g, &gsize, mod, "dev_pair"));
    CHECK_EQ_U64(gsize, 16);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(pair, g, 16));
    CHECK_EQ_U64(pair[0], 0x1122334455667788ull);
    CHECK_EQ_INT(pair[1], -2);
    unsigned char zeros[1000], expect0[1000] = {0};
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&g, &gsize, lib, "dev_zero"));
    CHECK_EQ_U64(gsize, 1000);
    memset(zeros, 0xff, sizeof zeros);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(zeros, g, 1000));
    CHECK_EQ_MEM(zeros, expect0, 1000);
    CUdeviceptr base;
    size_t range;
    CHECK_OK(cr_emu_cuMemGetAddressRange_v2(&base, &range, g + 10));
    CHECK_EQ_U64(base, g);
    CHECK_EQ_U64(range, 1000);
    CHECK_CU(cr_emu_cuMemcpyHtoD_v2(g, zeros, 1001), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuMemFree_v2(g), CUDA_ERROR_INVALID_VALUE); /* not the user's to free */
    CHECK_CU(cr_emu_cuLibraryGetGlobal(&g, &gsize, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    CHECK_OK(cr_emu_cuLibraryGetGlobal(NULL, &gsize, lib, "dev_counter"));
    /* each library has its own copy */
    CUdeviceptr g1, g2;
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&g1, NULL, lib, "dev_counter"));
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&g2, NULL, lib2, "dev_counter"));
    CHECK(g1 != g2);
    counter = 7;
    CHECK_OK(cr_emu_cuMemcpyHtoD_v2(g1, &counter, 4));
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(&counter, g2, 4));
    CHECK_EQ_INT(counter, 42);

    /* attributes, through either handle */
    int v;
    CHECK_OK(cr_emu_cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, with_shared, 0));
    CHECK_EQ_INT(v, 4096);
    CHECK_OK(cr_emu_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                       (CUfunction)bounded));
    CHECK_EQ_INT(v, 128);
    CHECK_OK(cr_emu_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f_mixed));
    CHECK_EQ_INT(v, 1024);
    CHECK_OK(cr_emu_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f_mixed));
    CHECK(v > 0 && v <= 255);
    CHECK_OK(cr_emu_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f_mixed));
    CHECK_EQ_INT(v, 90);
    CHECK_OK(cr_emu_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PTX_VERSION, f_mixed));
    CHECK_EQ_INT(v, 90);
    CHECK_OK(cr_emu_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f_mixed));
    CHECK_EQ_INT(v, 0);
    CHECK_OK(cr_emu_cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         with_shared, 0));
    CHECK_EQ_INT(v, 49152 - 4096);
    CHECK_OK(cr_emu_cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                         mixed, 0));
    CHECK_EQ_INT(v, -1);
    CHECK_CU(cr_emu_cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, mixed, 1),
             CUDA_ERROR_INVALID_DEVICE);
    CHECK_CU(cr_emu_cuFuncGetAttribute(&v, (CUfunction_attribute)99, f_mixed),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50,
                                         mixed, 0));
    CHECK_OK(
        cr_emu_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, f_mixed));
    CHECK_EQ_INT(v, 50);
    CHECK_CU(cr_emu_cuFuncSetAttribute(f_mixed, CU_FUNC_ATTRIBUTE_NUM_REGS, 3),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuFuncSetAttribute((CUfunction)with_shared,
                                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       232448 - 4096 + 1),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuFuncSetCacheConfig(f_mixed, CU_FUNC_CACHE_PREFER_L1));
    CHECK_OK(cr_emu_cuKernelSetCacheConfig(mixed, CU_FUNC_CACHE_PREFER_SHARED, 0));

    CHECK_OK(cr_emu_cuLibraryUnload(lib2));
    CHECK_CU(cr_emu_cuLibraryUnload(lib2), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuMemGetAddressRange_v2(&base, &range, g2), CUDA_ERROR_NOT_FOUND);
    CHECK_OK(cr_emu_cuLibraryUnload(lib));
    CHECK_CU(cr_emu_cuLibraryGetKernel(&mixed, lib, "mixed"), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuKernelGetName(&name, cpp), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuFuncGetName(&name, f_mixed), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuModuleGetFunction(&f2, mod, "mixed"), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ_U64(free_now(), free0);
    free(fatbin);
}

static void test_other_images(void)
{
    size_t size;
    CUlibrary lib;
    CUmodule mod, mod2;
    CUfunction f;
    CUdeviceptr g;
    size_t gsize;
    int v, counter;
    void *sm75 = read_file("emu_sm75.fatbin", NULL);
    CHECK_CU(cr_emu_cuLibraryLoadData(&lib, sm75, NULL, NULL, 0, NULL, NULL, 0),
             CUDA_ERROR_NO_BINARY_FOR_GPU);
    CHECK_CU(cr_emu_cuModuleLoadData(&mod, sm75), CUDA_ERROR_NO_BINARY_FOR_GPU);
    free(sm75);

    void *ptx80 = read_file("emu_ptx80.fatbin", NULL);
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, ptx80, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    CHECK_OK(cr_emu_cuLibraryGetKernel(&k, lib, "vec_add"));
    CHECK_OK(cr_emu_cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_PTX_VERSION, k, 0));
    CHECK_EQ_INT(v, 80);
    CHECK_OK(cr_emu_cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, k, 0));
    CHECK_EQ_INT(v, 90);
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&g, &gsize, lib, "dev_counter"));
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(&counter, g, 4));
    CHECK_EQ_INT(counter, 42);
    CHECK_OK(cr_emu_cuLibraryUnload(lib));
    free(ptx80);

    char *ptx = read_file("emu_sm90.ptx", NULL);
    CHECK_OK(cr_emu_cuModuleLoadDataEx(&mod, ptx, 0, NULL, NULL));
    CHECK_OK(cr_emu_cuModuleGetFunction(&f, mod, "_Z10cpp_kernelPii"));
    CHECK_OK(cr_emu_cuModuleGetGlobal_v2(&g, &gsize, mod, "const_table"));
    CHECK_EQ_U64(gsize, 32);
    CHECK_OK(cr_emu_cuMemcpyDtoH_v2(&counter, g + 4, 4));
    CHECK_EQ_INT(counter, 11);
    CHECK_CU(cr_emu_cuModuleGetFunction(&f, mod, "nope"), CUDA_ERROR_NOT_FOUND);
    CUlibrary none;
    CHECK_CU(cr_emu_cuKernelGetLibrary(&none, (CUkernel)f), CUDA_ERROR_INVALID_HANDLE);
    CHECK_OK(cr_emu_cuModuleUnload(mod));
    CHECK_CU(cr_emu_cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuFuncGetName((const char **)&ptx, f), CUDA_ERROR_INVALID_HANDLE);
    free(ptx);

    void *cubin = read_file("emu_sm90.cubin", &size);
    CHECK_OK(cr_emu_cuModuleLoadData(&mod, cubin));
    CHECK_OK(cr_emu_cuModuleLoadFatBinary(&mod2, cubin));
    CHECK_OK(cr_emu_cuModuleGetFunction(&f, mod, "with_shared"));
    CHECK_OK(cr_emu_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
    CHECK_EQ_INT(v, 4096);
    CHECK_OK(cr_emu_cuModuleUnload(mod));
    CHECK_OK(cr_emu_cuModuleUnload(mod2));
    free(cubin);

    /* a library's module goes with the library */
    void *fatbin = read_file("emu_sm90.fatbin", NULL);
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_OK(cr_emu_cuLibraryGetModule(&mod, lib));
    CHECK_CU(cr_emu_cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuLibraryUnload((CUlibrary)mod), CUDA_ERROR_INVALID_HANDLE);
    CHECK_OK(cr_emu_cuLibraryUnload(lib));

    /* malformed images */
    unsigned char bad[256] = {0x50, 0xed, 0x55, 0xba, 1,    0,    16,   0,
                              0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    CHECK_CU(cr_emu_cuModuleLoadData(&mod, bad), CUDA_ERROR_INVALID_IMAGE);
    memcpy(bad, fatbin, 16);
    memset(bad + 8, 0, 8);
    bad[8] = 200; /* 200 bytes of entries, all garbage */
    memset(bad + 16, 0xee, 200);
    CUresult rc = cr_emu_cuModuleLoadData(&mod, bad);
    CHECK(rc == CUDA_ERROR_INVALID_IMAGE || rc == CUDA_ERROR_NO_BINARY_FOR_GPU);
    free(fatbin);
}

static void test_launches(void)
{
    void *fatbin = read_file("emu_sm90.fatbin", NULL);
    CUlibrary lib;
    CUkernel mixed, vec_add, with_shared, bounded, no_params;
    CUfunction f_vec;
    CUstream s;
    size_t free_before_load = free_now();
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&mixed, lib, "mixed"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&vec_add, lib, "vec_add"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&with_shared, lib, "with_shared"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&bounded, lib, "bounded"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&no_params, lib, "no_params"));
    CHECK_OK(cr_emu_cuKernelGetFunction(&f_vec, vec_add));
    CHECK_OK(cr_emu_cuStreamCreateWithPriority(&s, 0, -3));
    unsigned long long sid;
    CHECK_OK(cr_emu_cuStreamGetId(s, &sid));

    /* 1. mixed(char, short, struct of 48 bytes, double, int *, long long), kernelParams */
    char c = 0x7f;
    short sh = -2;
    struct big b;
    for (int i = 0; i < 6; i++)
        b.v[i] = 1.25 * (i + 1);
    double d = -3.5;
    int *p = (int *)(uintptr_t)0x600000001000ull;
    long long ll = 0x0102030405060708ll;
    void *args[] = {&c, &sh, &b, &d, &p, &ll};
    unsigned char expected[80];
    memset(expected, 0, sizeof expected);
    memcpy(expected + 0, &c, 1);
    memcpy(expected + 2, &sh, 2);
    memcpy(expected + 8, &b, 48);
    memcpy(expected + 56, &d, 8);
    memcpy(expected + 64, &p, 8);
    memcpy(expected + 72, &ll, 8);
    char expected_hex[161];
    to_hex(expected, 80, expected_hex);
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)mixed, 3, 2, 1, 64, 2, 1, 128, s, args, NULL));

    /* 2. vec_add through extra (CU_LAUNCH_PARAM_BUFFER_*), as a CUfunction, legacy stream */
    unsigned char vbuf[32];
    memset(vbuf, 0, sizeof vbuf);
    for (int i = 0; i < 32; i++)
        vbuf[i] = (unsigned char)(i * 7 + 1);
    size_t vsize = sizeof vbuf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, vbuf, CU_LAUNCH_PARAM_BUFFER_SIZE, &vsize,
                     CU_LAUNCH_PARAM_END};
    char vbuf_hex[65];
    to_hex(vbuf, 32, vbuf_hex);
    CHECK_OK(cr_emu_cuLaunchKernel(f_vec, 1000, 1, 1, 256, 1, 1, 0, NULL, NULL, extra));

    /* 3. cuLaunchKernelEx with attributes */
    CUlaunchAttribute attrs[4];
    memset(attrs, 0, sizeof attrs);
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[0].value.clusterDim.x = 2;
    attrs[0].value.clusterDim.y = 1;
    attrs[0].value.clusterDim.z = 1;
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attrs[1].value.priority = -4;
    attrs[2].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[2].value.programmaticStreamSerializationAllowed = 1;
    attrs[3].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
    CUlaunchConfig cfg = {.gridDimX = 4,
                          .gridDimY = 3,
                          .gridDimZ = 2,
                          .blockDimX = 32,
                          .blockDimY = 4,
                          .blockDimZ = 2,
                          .sharedMemBytes = 0,
                          .hStream = s,
                          .attrs = attrs,
                          .numAttrs = 4};
    CHECK_OK(cr_emu_cuLaunchKernelEx(&cfg, (CUfunction)no_params, NULL, NULL));
    /* 4. cooperative */
    float *x = NULL;
    void *xargs[] = {&x};
    CHECK_OK(
        cr_emu_cuLaunchCooperativeKernel((CUfunction)bounded, 132, 1, 1, 128, 1, 1, 0, s, xargs));

    /* failed launches are not recorded */
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)no_params, 1, 1, 1, 1025, 1, 1, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)no_params, 1, 1, 1, 32, 32, 2, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)no_params, 1, 1, 1, 1, 1, 65, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)no_params, 1, 65536, 1, 1, 1, 1, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)no_params, 0, 1, 1, 1, 1, 1, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)no_params, 1, 1, 1, 1, 0, 1, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)no_params, 2147483647u, 65535, 65535, 1024, 1, 1,
                                   49152, s, NULL, NULL)); /* every limit exactly: fine */
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)no_params, 1, 1, 1, 1, 1, 1, 49153, s, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)with_shared, 1, 1, 1, 1, 1, 1, 49152 - 4095, s,
                                   xargs, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)bounded, 1, 1, 1, 256, 1, 1, 0, s, xargs, NULL),
             CUDA_ERROR_INVALID_VALUE); /* over __launch_bounds__, as on a GPU */
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)mixed, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE); /* parameters missing */
    CHECK_CU(cr_emu_cuLaunchKernel(f_vec, 1, 1, 1, 1, 1, 1, 0, s, args, extra),
             CUDA_ERROR_INVALID_VALUE); /* both forms */
    vsize = 16;
    CHECK_CU(cr_emu_cuLaunchKernel(f_vec, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra),
             CUDA_ERROR_INVALID_VALUE); /* buffer too small */
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)no_params, 1, 1, 1, 1, 1, 1, 0, (CUstream)0x99, NULL,
                                   NULL),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)0x1234, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)lib, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL),
             CUDA_ERROR_INVALID_HANDLE); /* a library is not a kernel */
    attrs[0].value.clusterDim.x = 3;     /* does not divide the grid (4) */
    CHECK_CU(cr_emu_cuLaunchKernelEx(&cfg, (CUfunction)no_params, NULL, NULL),
             CUDA_ERROR_INVALID_CLUSTER_SIZE);
    attrs[0].value.clusterDim.x = 4;
    attrs[0].value.clusterDim.y = 3;
    CHECK_CU(cr_emu_cuLaunchKernelEx(&cfg, (CUfunction)no_params, NULL, NULL),
             CUDA_ERROR_INVALID_CLUSTER_SIZE); /* divides the grid, but 12 blocks > 8 */
    attrs[0].value.clusterDim.x = 2;
    attrs[0].value.clusterDim.y = 1;
    attrs[3].id = (CUlaunchAttributeID)77;
    CHECK_CU(cr_emu_cuLaunchKernelEx(&cfg, (CUfunction)no_params, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    attrs[3].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
    CHECK_CU(
        cr_emu_cuLaunchCooperativeKernel((CUfunction)bounded, 100000, 1, 1, 128, 1, 1, 0, s, xargs),
        CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    CHECK_CU(cr_emu_cuLaunchKernelEx(NULL, (CUfunction)no_params, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);

    /* dynamic shared memory above 48 KiB once allowed */
    CHECK_OK(cr_emu_cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000,
                                         with_shared, 0));
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)with_shared, 1, 1, 1, 1024, 1, 1, 100000, NULL,
                                   xargs, NULL));

    CHECK_OK(cr_emu_cuCtxSynchronize());
    cJSON *lines[16] = {0};
    int n = trace_lines(lines, 16);
    CHECK_EQ_INT(n, 6);
    if (n == 6) {
        /* mixed: on s, priority -3 */
        CHECK_EQ_STR(json_str(lines[0], "kernel"), "mixed");
        check_dims(lines[0], "grid", 3, 2, 1);
        check_dims(lines[0], "block", 64, 2, 1);
        CHECK_EQ_INT(json_int(lines[0], "shared"), 128);
        CHECK_EQ_INT(json_int(lines[0], "stream"), (long long)sid);
        CHECK_EQ_INT(json_int(lines[0], "priority"), -3);
        CHECK_EQ_STR(json_str(lines[0], "params"), expected_hex);
        CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(lines[0], "attrs")), 0);
        /* vec_add: legacy stream, from extra */
        CHECK_EQ_STR(json_str(lines[1], "kernel"), "vec_add");
        CHECK_EQ_INT(json_int(lines[1], "stream"), 0);
        CHECK_EQ_INT(json_int(lines[1], "priority"), 0);
        CHECK_EQ_STR(json_str(lines[1], "params"), vbuf_hex);
        /* no_params with attributes, in the order given, IGNORE left out */
        CHECK_EQ_STR(json_str(lines[2], "kernel"), "no_params");
        CHECK_EQ_STR(json_str(lines[2], "params"), "");
        check_dims(lines[2], "block", 32, 4, 2);
        cJSON *at = cJSON_GetObjectItem(lines[2], "attrs");
        char *printed = cJSON_PrintUnformatted(at);
        CHECK_EQ_STR(printed, "[[4,2,1,1],[8,-4],[6,1]]");
        free(printed);
        /* cooperative */
        CHECK_EQ_STR(json_str(lines[3], "kernel"), "bounded");
        printed = cJSON_PrintUnformatted(cJSON_GetObjectItem(lines[3], "attrs"));
        CHECK_EQ_STR(printed, "[[2,1]]");
        free(printed);
        check_dims(lines[4], "grid", 2147483647, 65535, 65535);
        CHECK_EQ_INT(json_int(lines[4], "shared"), 49152);
        CHECK_EQ_STR(json_str(lines[5], "kernel"), "with_shared");
        CHECK_EQ_INT(json_int(lines[5], "shared"), 100000);
        for (int i = 0; i < n; i++)
            CHECK_EQ_INT(json_int(lines[i], "seq"), i + 1);
    }
    for (int i = 0; i < n; i++)
        cJSON_Delete(lines[i]);

    /* the interpreter hook sees each launch on the stream thread; its errors surface at the
     * next synchronization */
    cr_emu_set_launch_hook(hook, NULL);
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)mixed, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    CHECK_EQ_INT(hook_seen.calls, 1);
    CHECK_EQ_STR(hook_seen.kernel, "mixed");
    CHECK_EQ_INT(hook_seen.param_size, 80);
    CHECK_EQ_MEM(hook_seen.params, expected, 80);
    CUdeviceptr counter_addr;
    CHECK_OK(cr_emu_cuLibraryGetGlobal(&counter_addr, NULL, lib, "dev_counter"));
    CHECK_EQ_U64(hook_seen.counter_address, counter_addr);
    CHECK_EQ_INT(hook_seen.code_kind, CR_IMAGE_ELF);
    hook_seen.fail_next = 1;
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)no_params, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    CHECK_CU(cr_emu_cuStreamSynchronize(s), CUDA_ERROR_LAUNCH_FAILED);
    CHECK_OK(cr_emu_cuStreamSynchronize(s)); /* reported once */
    cr_emu_set_launch_hook(NULL, NULL);

    /* unloading with a launch still queued is safe: the handles go at once, the globals
     * once the launch has run */
    gate_t gate;
    gate_init(&gate);
    size_t free_loaded = free_now();
    CHECK_OK(cr_emu_cuLaunchHostFunc(s, gate_wait_fn, &gate));
    CHECK_OK(cr_emu_cuLaunchKernel((CUfunction)mixed, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CHECK_OK(cr_emu_cuLibraryUnload(lib));
    CHECK_CU(cr_emu_cuLaunchKernel((CUfunction)mixed, 1, 1, 1, 1, 1, 1, 0, s, args, NULL),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cr_emu_cuLibraryGetGlobal(&counter_addr, NULL, lib, "dev_counter"),
             CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ_U64(free_now(), free_loaded);
    gate_open(&gate);
    CHECK_OK(cr_emu_cuStreamSynchronize(s));
    /* the globals are released by the stream's worker once it has let go of the launch,
     * which may be a moment after the synchronize returned */
    CHECK_EQ_U64(free_soon(free_before_load), free_before_load);
    n = trace_lines(lines, 16);
    CHECK_EQ_INT(n, 9);
    if (n == 9)
        CHECK_EQ_STR(json_str(lines[8], "kernel"), "mixed");
    for (int i = 0; i < n; i++)
        cJSON_Delete(lines[i]);
    CHECK_OK(cr_emu_cuStreamDestroy_v2(s));
    free(fatbin);
}

static size_t dyn_calls;
static size_t smem_100k(int block)
{
    (void)block;
    dyn_calls++;
    return 100000;
}
static size_t smem_200k(int block)
{
    (void)block;
    dyn_calls++;
    return 200000;
}

static void test_occupancy(void)
{
    void *fatbin = read_file("emu_sm90.fatbin", NULL);
    CUlibrary lib;
    CUkernel no_params, with_shared, bounded;
    CUfunction f;
    int blocks, min_grid, block_size, cluster;
    size_t avail;
    CHECK_OK(cr_emu_cuLibraryLoadData(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&no_params, lib, "no_params"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&with_shared, lib, "with_shared"));
    CHECK_OK(cr_emu_cuLibraryGetKernel(&bounded, lib, "bounded"));
    CHECK_OK(cr_emu_cuKernelGetFunction(&f, no_params));
    /* limited by blocks per SM, by threads, by shared memory */
    CHECK_OK(cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 32, 0));
    CHECK_EQ_INT(blocks, 32);
    CHECK_OK(cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (CUfunction)no_params,
                                                                1024, 0));
    CHECK_EQ_INT(blocks, 2);
    CHECK_OK(cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        &blocks, f, 256, 100000, CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE));
    CHECK_EQ_INT(blocks, 2); /* 233472 / (100000 + 1024) */
    CHECK_OK(cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 120000));
    CHECK_EQ_INT(blocks, 1);
    CHECK_OK(cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (CUfunction)with_shared,
                                                                64, 0));
    CHECK_EQ_INT(blocks, 32); /* 233472 / 5120 = 45 > 32 */
    CHECK_OK(
        cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (CUfunction)bounded, 256, 0));
    CHECK_EQ_INT(blocks, 0); /* over its __launch_bounds__ */
    CHECK_CU(cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 0, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cr_emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (CUfunction)lib, 32, 0),
             CUDA_ERROR_INVALID_HANDLE);

    CHECK_OK(cr_emu_cuOccupancyMaxPotentialBlockSize(&min_grid, &block_size, f, NULL, 0, 0));
    CHECK_EQ_INT(block_size, 1024);
    CHECK_EQ_INT(min_grid, 2 * 132);
    CHECK_OK(cr_emu_cuOccupancyMaxPotentialBlockSize(&min_grid, &block_size, f, NULL, 0, 100));
    CHECK_EQ_INT(block_size, 64); /* 64 x 32 blocks fill the SM; 96 x 21 do not */
    CHECK_EQ_INT(min_grid, 32 * 132);
    dyn_calls = 0;
    CHECK_OK(cr_emu_cuOccupancyMaxPotentialBlockSizeWithFlags(&min_grid, &block_size, f, smem_200k,
                                                              0, 0, 0));
    CHECK(dyn_calls > 0);
    CHECK_EQ_INT(block_size, 1024);
    CHECK_EQ_INT(min_grid, 132); /* one 200000-byte block per SM */
    CHECK_OK(cr_emu_cuOccupancyMaxPotentialBlockSize(&min_grid, &block_size, f, smem_100k, 0, 0));
    CHECK_EQ_INT(min_grid, 2 * 132);
    CHECK_OK(cr_emu_cuOccupancyMaxPotentialBlockSize(&min_grid, &block_size, (CUfunction)bounded,
                                                     NULL, 0, 0));
    CHECK_EQ_INT(block_size, 128);

    CHECK_OK(cr_emu_cuOccupancyAvailableDynamicSMemPerBlock(&avail, f, 2, 256));
    CHECK_EQ_U64(avail, 233472 / 2 - 1024);
    CHECK_OK(
        cr_emu_cuOccupancyAvailableDynamicSMemPerBlock(&avail, (CUfunction)with_shared, 1, 256));
    CHECK_EQ_U64(avail, 232448 - 4096);
    CHECK_OK(cr_emu_cuOccupancyAvailableDynamicSMemPerBlock(&avail, f, 3, 1024));
    CHECK_EQ_U64(avail, 0); /* three 1024-thread blocks never fit */

    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg = {.gridDimX = 16,
                          .gridDimY = 1,
                          .gridDimZ = 1,
                          .blockDimX = 1024,
                          .blockDimY = 1,
                          .blockDimZ = 1,
                          .attrs = &attr,
                          .numAttrs = 1};
    CHECK_OK(cr_emu_cuOccupancyMaxPotentialClusterSize(&cluster, f, &cfg));
    CHECK_EQ_INT(cluster, 8);
    CHECK_OK(cr_emu_cuOccupancyMaxActiveClusters(&cluster, f, &cfg));
    CHECK_EQ_INT(cluster, 132); /* 2 blocks per SM, clusters of 2 */
    CHECK_OK(cr_emu_cuLibraryUnload(lib));
    free(fatbin);
}

/* The JIT linker joins PTX as a linker resolves symbols: a .weak definition gives way to a
 * .visible one, an internal helper both inputs carry is kept once, an .extern variable is
 * the definition's, vprintf is the device's; two different internal definitions of one
 * name, a .visible one defined again (when added), an undefined reference and inputs it
 * cannot run are refused with a log. */
static void test_link(void)
{
    static const char header[] = ".version 8.0\n.target sm_80\n.address_size 64\n";
    static const char helper[] = ".func (.param .b32 r) helper(.param .b32 x)\n{\n"
                                 "\t.reg .b32 %r<3>;\n\tld.param.b32 %r1, [x];\n"
                                 "\tadd.s32 %r2, %r1, 1;\n\tst.param.b32 [r], %r2;\n\tret;\n}\n";
    char a[2048], b[2048], other[2048];
    snprintf(a, sizeof a,
             "%s.extern .global .align 4 .u32 counter;\n"
             ".extern .func (.param .b32 r) vprintf(.param .b64 f, .param .b64 v);\n"
             ".weak .func (.param .b32 r) pick()\n{\n\t.reg .b32 %%r<2>;\n"
             "\tmov.u32 %%r1, 1;\n\tst.param.b32 [r], %%r1;\n\tret;\n}\n%s"
             ".visible .entry k(.param .u64 out)\n{\n\t.reg .b32 %%r<4>;\n\t.reg .b64 %%rd<3>;\n"
             "\tld.param.u64 %%rd1, [out];\n\tcvta.to.global.u64 %%rd2, %%rd1;\n"
             "\t{\n\t.param .b32 r0;\n\tcall.uni (r0), pick, ();\n\tld.param.b32 %%r1, [r0];\n\t}\n"
             "\tld.global.u32 %%r2, [counter];\n\tadd.s32 %%r3, %%r1, %%r2;\n"
             "\tst.global.u32 [%%rd2], %%r3;\n\tret;\n}\n",
             header, helper);
    snprintf(b, sizeof b,
             ".version 8.3\n.target sm_86\n.address_size 64\n"
             ".visible .global .align 4 .u32 counter = 40;\n%s"
             ".visible .func (.param .b32 r) pick()\n{\n\t.reg .b32 %%r<2>;\n"
             "\tmov.u32 %%r1, 2;\n\tst.param.b32 [r], %%r1;\n\tret;\n}\n",
             helper);
    snprintf(
        other, sizeof other,
        "%s.func (.param .b32 r) helper(.param .b32 x)\n{\n\tst.param.b32 [r], 0;\n\tret;\n}\n",
        header);

    char info[512], error[512];
    CUjit_option opt[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_WALL_TIME};
    void *val[] = {info, (void *)sizeof info, error, (void *)sizeof error, NULL};
    CUlinkState st;
    CHECK_OK(cr_emu_cuLinkCreate_v2(5, opt, val, &st));
    CHECK_OK(
        cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, a, strlen(a) + 1, "a.ptx", 0, NULL, NULL));
    CHECK_OK(cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, b, strlen(b), "b.ptx", 0, NULL, NULL));
    void *image;
    size_t size;
    CHECK_OK(cr_emu_cuLinkComplete(st, &image, &size));
    const char *text = image;
    CHECK_EQ_INT(size, strlen(text) + 1);
    CHECK(strncmp(text, ".version 8.3\n.target sm_86\n.address_size 64\n", 44) == 0);
    CHECK(strstr(text, "mov.u32 %r1, 2;") && !strstr(text, "mov.u32 %r1, 1;")); /* .weak lost */
    const char *first = strstr(text, "helper(.param .b32 x)\n{");
    CHECK(first && !strstr(first + 1, "helper(.param .b32 x)\n{")); /* the helper once */
    CHECK(!strstr(text, ".extern .global"));
    CHECK(strstr(text, "counter = 40;") < strstr(text, ".entry k"));
    CHECK(strstr(info, "linked 2 PTX inputs") != NULL);
    CHECK_EQ_INT((uintptr_t)val[1], strlen(info) + 1);
    CHECK_EQ_INT(error[0], 0);
    float ms;
    memcpy(&ms, &val[4], sizeof ms);
    CHECK(ms >= 0.0f && ms < 10000.0f);
    CUmodule mod;
    CUfunction k;
    CHECK_OK(cr_emu_cuModuleLoadData(&mod, image));
    CHECK_OK(cr_emu_cuModuleGetFunction(&k, mod, "k"));
    CHECK_OK(cr_emu_cuModuleUnload(mod));
    CHECK_OK(cr_emu_cuLinkDestroy(st));
    CHECK_CU(cr_emu_cuLinkDestroy(st), CUDA_ERROR_INVALID_HANDLE);

    /* two different internal helpers of one name (the sizes were written over: anew) */
    val[1] = (void *)sizeof info;
    val[3] = (void *)sizeof error;
    CHECK_OK(cr_emu_cuLinkCreate_v2(5, opt, val, &st));
    CHECK_OK(cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, b, strlen(b), "b.ptx", 0, NULL, NULL));
    CHECK_OK(cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, other, strlen(other), "other.ptx", 0,
                                     NULL, NULL));
    CHECK_CU(cr_emu_cuLinkComplete(st, &image, &size), CUDA_ERROR_INVALID_IMAGE);
    CHECK(strstr(error, "'helper' (in b.ptx and other.ptx)") != NULL);
    CHECK_OK(cr_emu_cuLinkDestroy(st));

    /* b again defines .visible counter and pick: refused when added, each named, and the
     * link cannot complete after, as the driver does */
    val[1] = (void *)sizeof info;
    val[3] = (void *)sizeof error;
    CHECK_OK(cr_emu_cuLinkCreate_v2(5, opt, val, &st));
    CHECK_OK(cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, a, strlen(a), "a.ptx", 0, NULL, NULL));
    CHECK_OK(cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, b, strlen(b), "b.ptx", 0, NULL, NULL));
    CHECK_CU(cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, b, strlen(b), "b2.ptx", 0, NULL, NULL),
             CUDA_ERROR_INVALID_SOURCE);
    CHECK(strstr(error, "Multiple definition of 'counter' in 'b2.ptx', first defined in "
                        "'b.ptx'") != NULL);
    CHECK(strstr(error, "Multiple definition of 'pick' in 'b2.ptx'") != NULL);
    CHECK_CU(cr_emu_cuLinkComplete(st, &image, &size), CUDA_ERROR_INVALID_SOURCE);
    CHECK_OK(cr_emu_cuLinkDestroy(st));

    /* a alone: pick has its .weak definition, counter none */
    val[1] = (void *)sizeof info;
    val[3] = (void *)sizeof error;
    CHECK_OK(cr_emu_cuLinkCreate_v2(5, opt, val, &st));
    CHECK_OK(cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, a, strlen(a), "a.ptx", 0, NULL, NULL));
    CHECK_CU(cr_emu_cuLinkComplete(st, &image, &size), CUDA_ERROR_INVALID_IMAGE);
    CHECK(strstr(error, "Undefined reference to 'counter' in 'a.ptx'") != NULL);
    /* what the device cannot run, and what is not there */
    CHECK_CU(
        cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_CUBIN, a, strlen(a), "a.cubin", 0, NULL, NULL),
        CUDA_ERROR_NO_BINARY_FOR_GPU);
    CHECK(strstr(error, "a.cubin: the emulated device links PTX only, not a cubin") != NULL);
    CHECK_CU(cr_emu_cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, "not ptx", 8, "junk", 0, NULL, NULL),
             CUDA_ERROR_INVALID_PTX);
    CHECK_CU(cr_emu_cuLinkAddFile_v2(st, CU_JIT_INPUT_PTX, "/nonexistent.ptx", 0, NULL, NULL),
             CUDA_ERROR_FILE_NOT_FOUND);
    CHECK_CU(cr_emu_cuLinkAddData_v2(st, (CUjitInputType)42, a, strlen(a), "x", 0, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cr_emu_cuLinkDestroy(st));
    CUjit_option unknown = (CUjit_option)500;
    CHECK_CU(cr_emu_cuLinkCreate_v2(1, &unknown, val, &st), CUDA_ERROR_INVALID_VALUE);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <fixture dir> <trace file>\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    trace_path = argv[2];
    unlink(trace_path);
    test_setup(ARENA, trace_path);
    /* these launches use made-up arguments: record them, do not run them (kernels that run
     * are tested in tests/ptx and tests/kernels) */
    cr_emu_set_execution(0);
    test_library();
    test_other_images();
    test_launches();
    test_occupancy();
    test_link();
    CHECK_DONE();
}
