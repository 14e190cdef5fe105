// link: the JIT linker as Numba and other run-time linkers use it, through the symbols a
// program finds in libcuda.so.1 with dlsym: device code compiled in two halves (link/caller.cu
// uses a function and a variable link/callee.cu defines, both PTX built with -rdc) is linked
// at run time, one half from its file and one from memory, with log buffers and the wall
// time asked for; the image is loaded and its kernel computes through the linked function
// and counts through the linked variable. Then the refusals: an undefined reference, a
// symbol defined twice, text that is not PTX (each with its error log), options the stub
// cannot carry, and a stale state.
//
//   link CALLER_PTX CALLEE_PTX
#include <cuda.h>
#include <dlfcn.h>

#include <vector>

#include "cr_test.h"

typedef CUresult (*create_t)(unsigned, CUjit_option *, void **, CUlinkState *);
typedef CUresult (*add_data_t)(CUlinkState, CUjitInputType, void *, size_t, const char *,
                               unsigned, CUjit_option *, void **);
typedef CUresult (*add_file_t)(CUlinkState, CUjitInputType, const char *, unsigned,
                               CUjit_option *, void **);
typedef CUresult (*complete_t)(CUlinkState, void **, size_t *);
typedef CUresult (*destroy_t)(CUlinkState);

static struct {
    create_t create, create_old;
    add_data_t add_data;
    add_file_t add_file;
    complete_t complete;
    destroy_t destroy;
    CUresult (*load)(CUmodule *, const void *);
    CUresult (*get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*get_global)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **);
    CUresult (*unload)(CUmodule);
    CUresult (*load_ex)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
} cu;

static void *must(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    CHECK(f != nullptr, "libcuda.so.1 has no %s", name);
    return f;
}

static std::string read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != nullptr, "cannot open %s", path);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        s.append(buf, n);
    fclose(f);
    return s;
}

// A link state with both logs and the wall time, as Numba creates it.
struct Linker {
    char info[4096], error[4096];
    CUjit_option options[6] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                               CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                               CU_JIT_WALL_TIME, CU_JIT_LOG_VERBOSE};
    void *values[6];
    CUlinkState state = nullptr;

    explicit Linker(create_t create)
    {
        memset(info, 'x', sizeof info);
        memset(error, 'x', sizeof error);
        values[0] = info;
        values[1] = (void *)(uintptr_t)sizeof info;
        values[2] = error;
        values[3] = (void *)(uintptr_t)sizeof error;
        values[4] = nullptr;
        values[5] = (void *)(uintptr_t)1;
        CHECK_CU(create(6, options, values, &state));
        CHECK(info[0] == 0 && error[0] == 0, "the logs were not emptied at creation");
    }
    size_t error_filled() const { return (size_t)(uintptr_t)values[3]; }
    float wall_ms() const
    {
        float ms;
        memcpy(&ms, &values[4], sizeof ms);
        return ms;
    }
};

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: link CALLER_PTX CALLEE_PTX");
    const char *caller_path = argv[1];
    std::string caller = read_text(argv[1]), callee = read_text(argv[2]);
    CHECK_CUDA(cudaFree(0)); // the primary context, current on this thread

    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(lib != nullptr, "libcuda.so.1 is not loaded: %s", dlerror());
    cu.create = (create_t)must(lib, "cuLinkCreate_v2");
    cu.create_old = (create_t)must(lib, "cuLinkCreate");
    cu.add_data = (add_data_t)must(lib, "cuLinkAddData_v2");
    cu.add_file = (add_file_t)must(lib, "cuLinkAddFile_v2");
    cu.complete = (complete_t)must(lib, "cuLinkComplete");
    cu.destroy = (destroy_t)must(lib, "cuLinkDestroy");
    *(void **)&cu.load = must(lib, "cuModuleLoadData");
    *(void **)&cu.get_function = must(lib, "cuModuleGetFunction");
    *(void **)&cu.get_global = must(lib, "cuModuleGetGlobal_v2");
    *(void **)&cu.launch = must(lib, "cuLaunchKernel");
    *(void **)&cu.unload = must(lib, "cuModuleUnload");
    *(void **)&cu.load_ex = must(lib, "cuModuleLoadDataEx");

    // the two halves: one from its file, one from memory (with its NUL, as Numba passes it)
    Linker ok(cu.create);
    CHECK_CU(cu.add_file(ok.state, CU_JIT_INPUT_PTX, caller_path, 0, nullptr, nullptr));
    CUjit_option per_input[] = {CU_JIT_OPTIMIZATION_LEVEL};
    void *per_input_values[] = {(void *)(uintptr_t)3};
    CHECK_CU(cu.add_data(ok.state, CU_JIT_INPUT_PTX, (void *)callee.c_str(), callee.size() + 1,
                         "callee.ptx", 1, per_input, per_input_values));
    void *image = nullptr;
    size_t image_size = 0;
    CHECK_CU(cu.complete(ok.state, &image, &image_size));
    CHECK(image != nullptr && image_size > 0, "no image (%zu bytes)", image_size);
    CHECK(ok.error[0] == 0, "a successful link wrote an error log: %s", ok.error);
    CHECK(ok.wall_ms() >= 0.0f && ok.wall_ms() < 60000.0f, "wall time %g ms", ok.wall_ms());
    printf("linked %zu bytes in %.3f ms; info log: %s\n", image_size, ok.wall_ms(), ok.info);

    // the linked kernel computes through the function of the other half and counts
    // through its variable (initialised there to 100)
    CUmodule mod;
    CHECK_CU(cu.load(&mod, image));
    CUfunction scale;
    CHECK_CU(cu.get_function(&scale, mod, "scale"));
    const int n = 1000;
    std::vector<float> in(n), out(n, -1.0f);
    for (int i = 0; i < n; i++)
        in[i] = (float)i * 0.5f;
    float *d_in, *d_out;
    CHECK_CUDA(cudaMalloc(&d_in, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_out, n * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(d_in, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    int count = n;
    void *args[] = {&d_in, &d_out, &count};
    CHECK_CU(cu.launch(scale, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
    CHECK_CUDA(cudaMemcpy(out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        CHECK(out[i] == 2.0f * in[i] + 1.0f, "out[%d] = %g, expected %g", i, out[i],
              2.0f * in[i] + 1.0f);
    CUdeviceptr calls;
    size_t calls_size;
    CHECK_CU(cu.get_global(&calls, &calls_size, mod, "calls"));
    int calls_value = 0;
    CHECK(calls_size == sizeof(int), "calls is %zu bytes", calls_size);
    CHECK_CUDA(cudaMemcpy(&calls_value, (void *)calls, sizeof calls_value, cudaMemcpyDeviceToHost));
    CHECK(calls_value == 100 + n, "calls = %d, expected %d", calls_value, 100 + n);
    CHECK_CU(cu.unload(mod));
    // loading with JIT options: the log buffers hold what the load logged (a string), never
    // what they held before
    char load_info[256], load_error[256];
    memset(load_info, 'x', sizeof load_info);
    memset(load_error, 'x', sizeof load_error);
    CUjit_option load_opt[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                               CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *load_val[] = {load_info, (void *)(uintptr_t)sizeof load_info, load_error,
                        (void *)(uintptr_t)sizeof load_error};
    CHECK_CU(cu.load_ex(&mod, image, 4, load_opt, load_val));
    CHECK(memchr(load_info, 0, sizeof load_info) && memchr(load_error, 0, sizeof load_error),
          "cuModuleLoadDataEx left a log buffer without its NUL");
    CHECK((size_t)(uintptr_t)load_val[3] <= sizeof load_error, "error log size %zu",
          (size_t)(uintptr_t)load_val[3]);
    CHECK_CU(cu.unload(mod));
    CHECK_CU(cu.destroy(ok.state));
    EXPECT_CU(cu.destroy(ok.state), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_CU(cu.complete(ok.state, &image, &image_size), CUDA_ERROR_INVALID_HANDLE);

    // the older name is the same function
    Linker old(cu.create_old);
    CHECK_CU(cu.add_data(old.state, CU_JIT_INPUT_PTX, (void *)caller.c_str(), caller.size(),
                         "caller.ptx", 0, nullptr, nullptr));
    // half the program: the other half's symbols are undefined, and the log says which (the
    // code is the driver's to choose: the emulated device's is checked in tests/emu)
    CHECK(cu.complete(old.state, &image, &image_size) != CUDA_SUCCESS, "half a program linked");
    CHECK(strstr(old.error, "twice") || strstr(old.error, "calls"),
          "the error log does not name the undefined symbol: '%s'", old.error);
    CHECK(old.error_filled() == strlen(old.error) + 1, "error log size %zu for %zu bytes",
          old.error_filled(), strlen(old.error));
    printf("undefined: %s", old.error);
    CHECK_CU(cu.destroy(old.state));

    // one half twice: its symbols are defined twice; NVIDIA's driver refuses the second
    // input when it is added, naming each symbol, and the link cannot complete after
    Linker twice(cu.create);
    CHECK_CU(cu.add_data(twice.state, CU_JIT_INPUT_PTX, (void *)callee.c_str(), callee.size(),
                         "callee.ptx", 0, nullptr, nullptr));
    EXPECT_CU(cu.add_data(twice.state, CU_JIT_INPUT_PTX, (void *)callee.c_str(), callee.size(),
                          "callee-again.ptx", 0, nullptr, nullptr),
              CUDA_ERROR_INVALID_SOURCE);
    printf("defined twice: %s\n", twice.error);
    CHECK(strstr(twice.error, "Multiple definition of '_Z5twicef'") &&
              strstr(twice.error, "Multiple definition of 'calls'"),
          "the error log does not name the symbols defined twice: '%s'", twice.error);
    EXPECT_CU(cu.complete(twice.state, &image, &image_size), CUDA_ERROR_INVALID_SOURCE);
    CHECK_CU(cu.destroy(twice.state));

    // not PTX: refused when added, with a log
    Linker bad(cu.create);
    const char junk[] = ".version 9.0\n.target sm_90\n.address_size 64\nthis is not ptx;\n";
    EXPECT_CU(cu.add_data(bad.state, CU_JIT_INPUT_PTX, (void *)junk, sizeof junk, "junk.ptx", 0,
                          nullptr, nullptr),
              CUDA_ERROR_INVALID_PTX);
    CHECK(bad.error[0] != 0, "no error log for text that is not PTX");
    EXPECT_CU(cu.add_file(bad.state, CU_JIT_INPUT_PTX, "/nonexistent/input.ptx", 0, nullptr,
                          nullptr),
              CUDA_ERROR_FILE_NOT_FOUND);
    EXPECT_CU(cu.add_data(bad.state, (CUjitInputType)99, (void *)junk, sizeof junk, "junk", 0,
                          nullptr, nullptr),
              CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cu.destroy(bad.state));

    // options: an unknown one is invalid; host symbol tables cannot reach the server
    CUlinkState st;
    CUjit_option unknown[] = {(CUjit_option)999};
    void *unknown_values[] = {nullptr};
    EXPECT_CU(cu.create(1, unknown, unknown_values, &st), CUDA_ERROR_INVALID_VALUE);
    const char *names[] = {"host_fn"};
    void *addresses[] = {(void *)&main};
    CUjit_option host[] = {CU_JIT_GLOBAL_SYMBOL_NAMES, CU_JIT_GLOBAL_SYMBOL_ADDRESSES,
                           CU_JIT_GLOBAL_SYMBOL_COUNT};
    void *host_values[] = {names, addresses, (void *)(uintptr_t)1};
    EXPECT_CU(cu.create(3, host, host_values, &st), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_CU(cu.destroy((CUlinkState)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);

    CHECK_CUDA(cudaFree(d_in));
    CHECK_CUDA(cudaFree(d_out));
    printf("link: all checks passed\n");
    return 0;
}
