/* Code in the client: libraries and modules are shipped to the server once, and parsed
 * here too, because kernelParams carries no sizes: each kernel's parameter layout comes
 * from the image's .nv.info sections or its PTX (common/fatbin.h). A load the client
 * cannot complete after the server loaded the code is unloaded there again.
 *
 * Threads: any application thread. Loads and lookups wait for the server's reply, never
 * under the code table's lock. */
#include "module.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "answers.h"
#include "client.h"
#include "context.h"
#include "error.h"
#include "handles.h"
#include "idmap.h"
#include "jit_options.h"
#include "log.h"
#include "memory.h"
#include "rangemap.h"
#include "request.h"

typedef struct {
    cr_image_t *image;     /* NULL when it could not be parsed: layouts are then unknown */
    cr_kernel_t *kernels;  /* one per image->kernels entry */
    cr_rangemap_t globals; /* device ranges of the globals looked up, forgotten at unload */
    int refs;              /* the library itself and the modules retrieved from it */
} code_t;

static pthread_mutex_t code_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_idmap_t code_by_handle = CR_IDMAP_INIT; /* library/module id -> code_t * */
static cr_idmap_t kernels = CR_IDMAP_INIT;        /* kernel/function id -> cr_kernel_t * */

cr_kernel_t *cr_kernel(uint64_t handle)
{
    uint64_t v = 0;
    handle = cr_handles_resolve(handle); /* a function object stands for its function */
    pthread_mutex_lock(&code_lock);
    int found = cr_idmap_get(&kernels, handle, &v);
    pthread_mutex_unlock(&code_lock);
    return found ? (cr_kernel_t *)(uintptr_t)v : NULL;
}

const cr_kernel_info_t *cr_kernel_layout(uint64_t handle)
{
    cr_kernel_t *k = cr_kernel(handle);
    return k ? k->info : NULL;
}

static void code_free(code_t *c)
{
    for (size_t i = 0; i < c->globals.count; i++)
        cr_devmap_remove(c->globals.ranges[i].start);
    cr_rangemap_free(&c->globals);
    cr_image_free(c->image);
    free(c->kernels);
    free(c);
}

/* Drops a reference; the last one forgets the image's kernels. Caller holds code_lock. */
static void code_unref(code_t *c)
{
    if (--c->refs > 0)
        return;
    /* forget the handles of this image's kernels */
    if (c->image) {
        size_t pos = 0;
        uint64_t key, value;
        while (cr_idmap_next(&kernels, &pos, &key, &value)) {
            const cr_kernel_t *k = (const cr_kernel_t *)(uintptr_t)value;
            if (k >= c->kernels && k < c->kernels + c->image->kernel_count)
                cr_idmap_remove(&kernels, key, NULL); /* leaves other slots in place */
        }
    }
    code_free(c);
}

/* Unloads on the server what load_image loaded but could not record. */
static void unload(uint16_t opcode, uint64_t h)
{
    CUresult r = opcode == CR_OP_cuLibraryLoadData
                     ? cr_remote_cuLibraryUnload((CUlibrary)(uintptr_t)h)
                     : cr_remote_cuModuleUnload((CUmodule)(uintptr_t)h);
    cr_handles_remove(h);
    if (r != CUDA_SUCCESS)
        CR_WARN("cannot unload code the client failed to record: %s", cr_cuda_error_name(r));
}

/* Ships an image and records it under the handle the server returns. */
static CUresult load_image(uint16_t opcode, uint64_t *handle, const void *code)
{
    cr_client_t *cl = cr_client();
    if (!cl)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle || !code)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cr_ctx_require();
    if (r != CUDA_SUCCESS && opcode == CR_OP_cuModuleLoadData)
        return r; /* modules belong to a context; libraries do not */
    const void *start;
    size_t size;
    cr_image_kind_t kind;
    if (cr_image_measure(code, &start, &size, &kind) != 0)
        return CUDA_ERROR_INVALID_IMAGE;

    code_t *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->refs = 1;
    int err = cr_image_parse(start, size, &c->image);
    if (!err) {
        c->kernels =
            calloc(c->image->kernel_count ? c->image->kernel_count : 1, sizeof *c->kernels);
        if (!c->kernels) {
            code_free(c);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        for (uint32_t i = 0; i < c->image->kernel_count; i++)
            c->kernels[i].info = &c->image->kernels[i];
    } else {
        c->image = NULL;
        CR_WARN("cannot read kernel layouts from a %zu-byte code image (%s); its kernels can "
                "only be launched with CU_LAUNCH_PARAM_BUFFER_POINTER",
                size, cr_strerror(err));
    }

    cr_msg_t m;
    if ((err = cr_msg_begin(cl->conn, &m, opcode)) != 0) {
        code_free(c);
        return cr_transport_error(err);
    }
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_int(&m.pk, kind);
    cr_msg_bulk(&m, start, size);
    uint64_t h = 0;
    r = cr_call_u64(&m, &h);
    if (r != CUDA_SUCCESS) {
        code_free(c);
        return r;
    }
    err = cr_handles_add(h, opcode == CR_OP_cuLibraryLoadData ? CR_HT_CUlib : CR_HT_CUmod);
    if (!err) {
        pthread_mutex_lock(&code_lock);
        err = cr_idmap_put(&code_by_handle, h, (uint64_t)(uintptr_t)c);
        pthread_mutex_unlock(&code_lock);
    }
    if (err) { /* the server holds the code, the caller will not: unload it there */
        unload(opcode, h);
        code_free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = h;
    return CUDA_SUCCESS;
}

static code_t *code_of(uint64_t handle)
{
    uint64_t v = 0;
    return cr_idmap_get(&code_by_handle, handle, &v) ? (code_t *)(uintptr_t)v : NULL;
}

/* Remembers kernel `name` of image `owner` under the handle `h`. */
static void record_kernel(uint64_t owner, uint64_t h, const char *name)
{
    pthread_mutex_lock(&code_lock);
    code_t *c = code_of(owner);
    const cr_kernel_info_t *k = c && c->image ? cr_image_kernel(c->image, name) : NULL;
    if (k)
        cr_idmap_put(&kernels, h, (uint64_t)(uintptr_t)&c->kernels[k - c->image->kernels]);
    pthread_mutex_unlock(&code_lock);
}

static void forget(uint64_t handle)
{
    pthread_mutex_lock(&code_lock);
    uint64_t v;
    if (cr_idmap_remove(&code_by_handle, handle, &v))
        code_unref((code_t *)(uintptr_t)v);
    pthread_mutex_unlock(&code_lock);
}

/* --- libraries ------------------------------------------------------------------------------ */

CUresult cr_hand_cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jit_options,
                                   void **jit_values, unsigned int jit_count,
                                   CUlibraryOption *options, void **values, unsigned int count)
{
    /* JIT and library options only tune how the driver keeps the image: the server keeps
     * its own copy, so none of them changes what we do */
    cr_jit_logs_empty(jit_count, jit_options, jit_values);
    return load_image(CR_OP_cuLibraryLoadData, (uint64_t *)library, code);
}

void cr_jit_logs_empty(unsigned n, const CUjit_option *options, void **values)
{
    if (!options || !values)
        return;
    size_t cap[2] = {0, 0};
    for (unsigned i = 0; i < n; i++) {
        cr_jit_kind_t kind = cr_jit_option_kind((uint32_t)options[i]);
        if (kind == CR_JIT_INFO_SIZE || kind == CR_JIT_ERROR_SIZE) {
            cap[kind == CR_JIT_ERROR_SIZE] = (size_t)(uintptr_t)values[i];
            values[i] = NULL;
        } else if (kind == CR_JIT_WALL_TIME) {
            values[i] = NULL; /* 0.0f */
        }
    }
    for (unsigned i = 0; i < n; i++) {
        cr_jit_kind_t kind = cr_jit_option_kind((uint32_t)options[i]);
        if ((kind == CR_JIT_INFO_LOG || kind == CR_JIT_ERROR_LOG) && values[i] &&
            cap[kind == CR_JIT_ERROR_LOG])
            *(char *)values[i] = 0;
    }
}

void *cr_code_read_file(const char *path, size_t *len, CUresult *r)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 ||
        (size_t)st.st_size > CR_IMAGE_MAX_SIZE) {
        if (fd >= 0)
            close(fd);
        *r = CUDA_ERROR_FILE_NOT_FOUND;
        return NULL;
    }
    /* one spare NUL so that a PTX file is a string */
    char *buf = calloc(1, (size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf || got != (size_t)st.st_size) {
        free(buf);
        *r = buf ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    if (len)
        *len = got;
    return buf;
}

/* Loads the image in a file (cuLibraryLoadFromFile, cuModuleLoad). */
static CUresult load_file(uint16_t opcode, uint64_t *handle, const char *path)
{
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    void *data = cr_code_read_file(path, NULL, &r);
    if (!data)
        return r;
    r = load_image(opcode, handle, data);
    free(data);
    return r;
}

CUresult cr_hand_cuLibraryLoadFromFile(CUlibrary *library, const char *file,
                                       CUjit_option *jit_options, void **jit_values,
                                       unsigned int jit_count, CUlibraryOption *options,
                                       void **values, unsigned int count)
{
    cr_jit_logs_empty(jit_count, jit_options, jit_values);
    return load_file(CR_OP_cuLibraryLoadData, (uint64_t *)library, file);
}

CUresult cr_hand_cuLibraryUnload(CUlibrary library)
{
    CUresult r = cr_remote_cuLibraryUnload(library);
    if (r == CUDA_SUCCESS)
        forget((uint64_t)(uintptr_t)library);
    return r;
}

CUresult cr_hand_cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name)
{
    /* kept (answers.h): the library and the name */
    uint8_t key[CR_ANSWER_KEY_MAX];
    uint64_t lib = (uint64_t)(uintptr_t)library, generation = cr_ctx_attributes_generation();
    size_t name_len = name ? strlen(name) : 0, len = 0;
    if (kernel && name && cr_client() && cr_handles_valid(lib, CR_HT_CUlib) &&
        name_len + sizeof lib <= sizeof key) {
        memcpy(key, &lib, sizeof lib);
        memcpy(key + sizeof lib, name, name_len);
        len = sizeof lib + name_len;
        if (cr_answer_find(CR_OP_cuLibraryGetKernel, key, len, kernel, sizeof *kernel))
            return CUDA_SUCCESS;
    }
    CUresult r = cr_remote_cuLibraryGetKernel(kernel, library, name);
    if (r == CUDA_SUCCESS) {
        record_kernel(lib, (uint64_t)(uintptr_t)*kernel, name);
        cr_answer_keep(CR_OP_cuLibraryGetKernel, key, len, generation, kernel, sizeof *kernel);
    }
    return r;
}

CUresult cr_hand_cuLibraryGetModule(CUmodule *module, CUlibrary library)
{
    CUresult r = cr_remote_cuLibraryGetModule(module, library);
    if (r != CUDA_SUCCESS)
        return r;
    /* the module shares the library's image, for cuModuleGetFunction */
    pthread_mutex_lock(&code_lock);
    code_t *c = code_of((uint64_t)(uintptr_t)library);
    if (c && !code_of((uint64_t)(uintptr_t)*module) &&
        cr_idmap_put(&code_by_handle, (uint64_t)(uintptr_t)*module, (uint64_t)(uintptr_t)c) == 0)
        c->refs++;
    pthread_mutex_unlock(&code_lock);
    return CUDA_SUCCESS;
}

/* Hands a global's address and size to the caller, and records its device range until
 * its code is unloaded. */
static CUresult global_found(CUresult r, uint64_t owner, CUdeviceptr p, size_t size,
                             CUdeviceptr *dptr, size_t *bytes)
{
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr)
        *dptr = p;
    if (bytes)
        *bytes = size;
    if (!p || !size)
        return r;
    cr_devmap_add(p, size);
    pthread_mutex_lock(&code_lock);
    code_t *c = code_of(owner);
    if (c && !cr_rangemap_find(&c->globals, p))
        cr_rangemap_add(&c->globals, p, size, 0);
    pthread_mutex_unlock(&code_lock);
    return r;
}

CUresult cr_hand_cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                    const char *name)
{
    CUdeviceptr p = 0;
    size_t size = 0;
    CUresult r = cr_remote_cuLibraryGetGlobal(&p, &size, library, name);
    return global_found(r, (uint64_t)(uintptr_t)library, p, size, dptr, bytes);
}

CUresult cr_hand_cuKernelGetFunction(CUfunction *func, CUkernel kernel)
{
    /* kept (answers.h): the kernel in the current context */
    uint64_t key[2] = {(uint64_t)(uintptr_t)kernel, (uint64_t)(uintptr_t)cr_ctx_current()};
    uint64_t generation = cr_ctx_attributes_generation();
    int keep = func && key[1] && cr_client() && cr_handles_valid(key[0], CR_HT_CUkern);
    if (keep && cr_answer_find(CR_OP_cuKernelGetFunction, key, sizeof key, func, sizeof *func))
        return CUDA_SUCCESS;
    CUresult r = cr_remote_cuKernelGetFunction(func, kernel);
    if (r == CUDA_SUCCESS) { /* the function shares the kernel's state */
        cr_kernel_t *k = cr_kernel((uint64_t)(uintptr_t)kernel);
        pthread_mutex_lock(&code_lock);
        if (k)
            cr_idmap_put(&kernels, (uint64_t)(uintptr_t)*func, (uint64_t)(uintptr_t)k);
        pthread_mutex_unlock(&code_lock);
        if (keep)
            cr_answer_keep(CR_OP_cuKernelGetFunction, key, sizeof key, generation, func,
                           sizeof *func);
    }
    return r;
}

size_t cr_code_kernel_names(uint64_t module, const char **names, size_t room)
{
    size_t n = 0;
    pthread_mutex_lock(&code_lock);
    code_t *c = code_of(module);
    if (c && c->image)
        for (uint32_t i = 0; i < c->image->kernel_count; i++, n++)
            if (n < room)
                names[n] = c->image->kernels[i].name;
    pthread_mutex_unlock(&code_lock);
    return n;
}

uint64_t cr_kernel_behind(uint64_t func)
{
    uint64_t found = 0, v, key;
    pthread_mutex_lock(&code_lock);
    if (cr_idmap_get(&kernels, func, &v)) {
        size_t pos = 0;
        uint64_t k = v;
        while (!found && cr_idmap_next(&kernels, &pos, &key, &v))
            if (v == k && key != func && cr_handles_valid(key, CR_HT_CUkern))
                found = key;
    }
    pthread_mutex_unlock(&code_lock);
    return found;
}

static CUresult name_of(uint64_t handle, const char **name)
{
    if (!cr_client())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    const cr_kernel_info_t *k = cr_kernel_layout(handle);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = k->name;
    return CUDA_SUCCESS;
}

CUresult cr_hand_cuKernelGetName(const char **name, CUkernel kernel)
{
    return name_of((uint64_t)(uintptr_t)kernel, name);
}

CUresult cr_hand_cuFuncGetName(const char **name, CUfunction func)
{
    return name_of(cr_handles_resolve((uint64_t)(uintptr_t)func), name);
}

/* --- modules -------------------------------------------------------------------------------- */

CUresult cr_hand_cuModuleLoadData(CUmodule *module, const void *image)
{
    return load_image(CR_OP_cuModuleLoadData, (uint64_t *)module, image);
}

CUresult cr_hand_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int count,
                                    CUjit_option *options, void **values)
{
    cr_jit_logs_empty(count, options, values);
    return load_image(CR_OP_cuModuleLoadData, (uint64_t *)module, image);
}

CUresult cr_hand_cuModuleLoadFatBinary(CUmodule *module, const void *fatbin)
{
    return load_image(CR_OP_cuModuleLoadData, (uint64_t *)module, fatbin);
}

CUresult cr_hand_cuModuleLoad(CUmodule *module, const char *fname)
{
    return load_file(CR_OP_cuModuleLoadData, (uint64_t *)module, fname);
}

CUresult cr_hand_cuModuleUnload(CUmodule module)
{
    CUresult r = cr_remote_cuModuleUnload(module);
    if (r == CUDA_SUCCESS)
        forget((uint64_t)(uintptr_t)module);
    return r;
}

CUresult cr_hand_cuModuleGetFunction(CUfunction *func, CUmodule module, const char *name)
{
    CUresult r = cr_remote_cuModuleGetFunction(func, module, name);
    if (r == CUDA_SUCCESS)
        record_kernel((uint64_t)(uintptr_t)module, (uint64_t)(uintptr_t)*func, name);
    return r;
}

CUresult cr_hand_cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule module,
                                      const char *name)
{
    CUdeviceptr p = 0;
    size_t size = 0;
    CUresult r = cr_remote_cuModuleGetGlobal_v2(&p, &size, module, name);
    return global_found(r, (uint64_t)(uintptr_t)module, p, size, dptr, bytes);
}

/* --- attributes ------------------------------------------------------------------------------
 *
 * A kernel's attributes and cache preference change only through the sets below. Each
 * kernel record has a version that moves when a set may have changed something: answers
 * about the kernel (answers.h) are keyed with it, so a set on one kernel leaves the answers
 * about the others standing. A set to the value the stub last set for the kernel is
 * answered here: cuBLASLt sets a kernel's attribute before each launch, most often to the
 * value it has (seen on an H100, a waiting call per matrix product). What is set lasts
 * while the attributes' generation (context.h) stays: a context reset or destroyed resets
 * them. */

uint32_t cr_kernel_version(uint64_t handle)
{
    cr_kernel_t *k = cr_kernel(handle);
    return k ? __atomic_load_n(&k->version, __ATOMIC_ACQUIRE) : 0;
}

/* 1 when the kernel's last set of `what` (an attribute, or CACHE_CONFIG) was this value,
 * through this handle (a function of one context, or the kernel) on `device`, in this
 * generation. */
#define CACHE_CONFIG CU_FUNC_ATTRIBUTE_MAX
static int set_before(const cr_kernel_t *k, uint64_t handle, int what, int value, int device)
{
    int same = 0;
    pthread_mutex_lock(&code_lock);
    const cr_kernel_set_t *s = &k->set[what];
    same = s->valid && s->handle == handle && s->value == value && s->device == device &&
           s->generation == cr_ctx_attributes_generation();
    pthread_mutex_unlock(&code_lock);
    return same;
}

/* A set the server answered: what the kernel holds may differ now. */
static void set_done(CUresult r, uint64_t handle, int what, int value, int device)
{
    cr_kernel_t *k = cr_kernel(handle);
    if (!k) { /* no record to version: every answer is in doubt */
        cr_ctx_attributes_changed();
        return;
    }
    __atomic_add_fetch(&k->version, 1, __ATOMIC_ACQ_REL);
    if (what < 0 || what > CACHE_CONFIG) /* an attribute the driver refused, surely */
        return;
    pthread_mutex_lock(&code_lock);
    cr_kernel_set_t *s = &k->set[what];
    s->valid = r == CUDA_SUCCESS;
    s->handle = handle;
    s->value = value;
    s->device = device;
    s->generation = cr_ctx_attributes_generation();
    pthread_mutex_unlock(&code_lock);
    if (r == CUDA_SUCCESS && what == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        __atomic_store_n(&k->max_dynamic_shared, (uint32_t)value, __ATOMIC_RELAXED);
}

/* Whether a set of `what` to `value` is answered here: a live handle of a known kernel,
 * set to that value before. */
static int set_again(uint64_t handle, unsigned type, int what, int value, int device)
{
    if (!handle || !cr_client() || !cr_handles_valid(handle, type) || what < 0 ||
        what > CACHE_CONFIG)
        return 0;
    cr_kernel_t *k = cr_kernel(handle);
    return k && set_before(k, handle, what, value, device);
}

/* An attribute read (kept, answers.h): [attribute, handle, device, the kernel's version]. */
static CUresult get_attribute(uint16_t opcode, int *value, int attrib, uint64_t handle,
                              unsigned type, int device, CUresult (*ask)(int *, int, uint64_t, int))
{
    int64_t key[4] = {attrib, (int64_t)handle, device, cr_kernel_version(handle)};
    uint64_t generation = cr_ctx_attributes_generation();
    int keep = value && cr_client() && cr_handles_valid(handle, type);
    if (keep && cr_answer_find(opcode, key, sizeof key, value, sizeof *value))
        return CUDA_SUCCESS;
    CUresult r = ask(value, attrib, handle, device);
    if (r == CUDA_SUCCESS && keep)
        cr_answer_keep(opcode, key, sizeof key, generation, value, sizeof *value);
    return r;
}

static CUresult ask_kernel(int *value, int attrib, uint64_t kernel, int device)
{
    return cr_remote_cuKernelGetAttribute(value, (CUfunction_attribute)attrib,
                                          (CUkernel)(uintptr_t)kernel, device);
}

static CUresult ask_func(int *value, int attrib, uint64_t func, int device)
{
    (void)device;
    return cr_remote_cuFuncGetAttribute(value, (CUfunction_attribute)attrib,
                                        (CUfunction)(uintptr_t)func);
}

CUresult cr_hand_cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev)
{
    return get_attribute(CR_OP_cuKernelGetAttribute, pi, attrib, (uint64_t)(uintptr_t)kernel,
                         CR_HT_CUkern, dev, ask_kernel);
}

CUresult cr_hand_cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction func)
{
    return get_attribute(CR_OP_cuFuncGetAttribute, pi, attrib,
                         cr_handles_resolve((uint64_t)(uintptr_t)func), CR_HT_CUfunc, -1, ask_func);
}

CUresult cr_hand_cuFuncSetAttribute(CUfunction func, CUfunction_attribute attrib, int value)
{
    uint64_t handle = cr_handles_resolve((uint64_t)(uintptr_t)func);
    if (set_again(handle, CR_HT_CUfunc, attrib, value, -1))
        return CUDA_SUCCESS;
    CUresult r = cr_remote_cuFuncSetAttribute(func, attrib, value);
    set_done(r, handle, attrib, value, -1);
    return r;
}

CUresult cr_hand_cuKernelSetAttribute(CUfunction_attribute attrib, int value, CUkernel kernel,
                                      CUdevice dev)
{
    uint64_t handle = (uint64_t)(uintptr_t)kernel;
    if (set_again(handle, CR_HT_CUkern, attrib, value, dev))
        return CUDA_SUCCESS;
    CUresult r = cr_remote_cuKernelSetAttribute(attrib, value, kernel, dev);
    set_done(r, handle, attrib, value, dev);
    return r;
}

/* Cache preferences weigh in occupancy, as attributes do. */
CUresult cr_hand_cuFuncSetCacheConfig(CUfunction func, CUfunc_cache config)
{
    uint64_t handle = cr_handles_resolve((uint64_t)(uintptr_t)func);
    if (set_again(handle, CR_HT_CUfunc, CACHE_CONFIG, (int)config, -1))
        return CUDA_SUCCESS;
    CUresult r = cr_remote_cuFuncSetCacheConfig(func, config);
    set_done(r, handle, CACHE_CONFIG, (int)config, -1);
    return r;
}

CUresult cr_hand_cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    uint64_t handle = (uint64_t)(uintptr_t)kernel;
    if (set_again(handle, CR_HT_CUkern, CACHE_CONFIG, (int)config, dev))
        return CUDA_SUCCESS;
    CUresult r = cr_remote_cuKernelSetCacheConfig(kernel, config, dev);
    set_done(r, handle, CACHE_CONFIG, (int)config, dev);
    return r;
}

/* The context's preference weighs in every kernel's occupancy: asked again, and every
 * answer dropped, only when it changes (the last set, of one context, is remembered). */
static struct {
    pthread_mutex_t lock;
    CUcontext ctx;
    int config;
    uint64_t generation;
} ctx_cache = {PTHREAD_MUTEX_INITIALIZER, NULL, -1, 0};

CUresult cr_hand_cuCtxSetCacheConfig(CUfunc_cache config)
{
    CUcontext ctx = cr_client() ? cr_ctx_current() : NULL;
    pthread_mutex_lock(&ctx_cache.lock);
    int same = ctx && ctx_cache.ctx == ctx && ctx_cache.config == (int)config &&
               ctx_cache.generation == cr_ctx_attributes_generation();
    pthread_mutex_unlock(&ctx_cache.lock);
    if (same)
        return CUDA_SUCCESS;
    CUresult r = cr_remote_cuCtxSetCacheConfig(config);
    cr_ctx_attributes_changed();
    pthread_mutex_lock(&ctx_cache.lock);
    ctx_cache.ctx = r == CUDA_SUCCESS ? ctx : NULL;
    ctx_cache.config = (int)config;
    ctx_cache.generation = cr_ctx_attributes_generation();
    pthread_mutex_unlock(&ctx_cache.lock);
    return r;
}
