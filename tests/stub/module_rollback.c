/* A module the stub cannot record after the server loaded it is unloaded on the server.
 *
 * The stub records a loaded module's handle and code in tables of its own; when one of
 * them cannot grow, the load fails with CUDA_ERROR_OUT_OF_MEMORY and the server must not
 * keep the module until the session ends. This program makes exactly that step fail: it
 * defines calloc and sendmsg, which the stub's calls bind to, and fails every calloc of the
 * loading thread from the moment the load request is sent until that thread sends its next
 * request, which must be the unload. It runs as a tenant with a quota, so cuMemGetInfo
 * shows what the tenant is charged, the loaded code's globals included.
 *
 *   module_rollback     (run by run.py as a tenant with a quota; see CMakeLists.txt) */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cr_opcodes.h"

#define GLOBAL_BYTES (16u << 20)

/* one kernel and a 16 MiB global: loading the module charges the tenant for the global */
static const char ptx[] = ".version 7.0\n"
                          ".target sm_75\n"
                          ".address_size 64\n"
                          ".visible .global .align 8 .b8 cr_rollback_data[16777216];\n"
                          ".visible .entry cr_rollback_kernel()\n"
                          "{\n"
                          "    ret;\n"
                          "}\n";

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)r_);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

void *__libc_calloc(size_t n, size_t size);

static volatile int armed;   /* fail after the next module load is sent */
static __thread int failing; /* this thread's callocs fail */
static int failed_callocs;   /* how many did */
static int next_opcode = -1; /* what the failing thread sent next, -1: nothing */

#define EXPORTED __attribute__((visibility("default"))) /* the project builds hidden */

EXPORTED void *calloc(size_t n, size_t size)
{
    if (failing) {
        failed_callocs++;
        return NULL;
    }
    return __libc_calloc(n, size);
}

/* The opcode of the first frame a message starts with. */
static int first_opcode(const struct msghdr *msg)
{
    if (msg->msg_iovlen == 0 || msg->msg_iov[0].iov_len < 8)
        return -1;
    const unsigned char *h = msg->msg_iov[0].iov_base;
    return h[6] | h[7] << 8;
}

EXPORTED ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    int op = first_opcode(msg);
    if (failing) {
        failing = 0;
        next_opcode = op;
    } else if (armed && op == CR_OP_cuModuleLoadData) {
        armed = 0;
        failing = 1;
    }
    return syscall(SYS_sendmsg, fd, msg, flags);
}

static size_t tenant_free(void)
{
    size_t free_bytes, total;
    CK(cuMemGetInfo(&free_bytes, &total));
    return free_bytes;
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    size_t before = tenant_free();

    /* the first load: the stub's tables are still empty, so recording it must allocate */
    armed = 1;
    CUresult r = cuModuleLoadData(&mod, ptx);
    int load_sent = !armed;
    armed = failing = 0; /* whatever happened, this thread allocates again */
    CHECK(load_sent);
    printf("load with recording failing: %d after %d failed callocs; next request %d\n", (int)r,
           failed_callocs, next_opcode);
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(failed_callocs > 0);
    CHECK(next_opcode == CR_OP_cuModuleUnload);
    size_t after = tenant_free();
    printf("tenant's free memory: %zu before, %zu after\n", before, after);
    CHECK(after == before);

    /* the same load, recorded: the global is charged while the module is loaded */
    CK(cuModuleLoadData(&mod, ptx));
    CUfunction fn;
    CK(cuModuleGetFunction(&fn, mod, "cr_rollback_kernel"));
    size_t loaded = tenant_free();
    printf("with the module loaded: %zu\n", loaded);
    CHECK(before - loaded >= GLOBAL_BYTES);
    CK(cuModuleUnload(mod));
    CHECK(tenant_free() == before);
    CK(cuDevicePrimaryCtxRelease(dev));
    printf("module_rollback: ok\n");
    return 0;
}
