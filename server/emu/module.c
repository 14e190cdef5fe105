/* Code of the emulated device: libraries, modules, kernels, functions and global variables.
 *
 * A library (cuLibraryLoadData) or module (cuModuleLoad*) is one parsed image (common/
 * fatbin.h) with the entry a device of the configured compute capability (cr__emu.sm) would
 * load. Each kernel gets a CUkernel handle (libraries only) and a CUfunction handle, both
 * naming the same cr__kernel_t; each global variable becomes an allocation in the arena,
 * initialised from the image. A
 * library loaded with cuLibraryLoadData also has a CUmodule handle (cuLibraryGetModule).
 * All handles hold a reference on the library object and so do queued launches: unloading
 * removes the handles at once, and the globals are freed when the last queued launch of the
 * library has run (at once when none is queued). */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

/* Runs when the last reference goes: after the unload and after every queued launch of the
 * library ran, so the globals are no longer in use. */
static void library_release(cr__obj_t *obj)
{
    cr__library_t *lib = (cr__library_t *)obj;
    for (uint32_t i = 0; i < lib->global_count; i++) {
        if (lib->globals[i].address)
            cr__mem_free(lib->globals[i].address, 1u << CR__ALLOC_GLOBAL);
        free(lib->globals[i].name);
    }
    free(lib->globals);
    free(lib->kernels);
    cr__library_ptx_free(lib);
    pthread_mutex_destroy(&lib->ptx_lock);
    cr_image_free(lib->image);
    free(lib);
}

/* Unregisters all the library's handles (the caller may already have removed the one it was
 * called with; removing it again is harmless). Its globals go with the last reference. */
static void library_unload(cr__library_t *lib)
{
    cr__handle_del(lib->lib_handle, CR__HMASK(CR__H_LIBRARY));
    cr__handle_del(lib->mod_handle, CR__HMASK(CR__H_MODULE));
    for (uint32_t i = 0; i < lib->kernel_count; i++) {
        cr__handle_del(lib->kernels[i].kernel_handle, CR__HMASK(CR__H_KERNEL));
        cr__handle_del(lib->kernels[i].func_handle, CR__HMASK(CR__H_FUNCTION));
    }
}

static CUresult create_globals(cr__library_t *lib)
{
    const cr_image_t *img = lib->image;
    if (img->global_count == 0)
        return CUDA_SUCCESS;
    lib->globals = calloc(img->global_count, sizeof *lib->globals);
    if (!lib->globals)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < img->global_count; i++) {
        const cr_global_info_t *g = &img->globals[i];
        cr__global_t *dst = &lib->globals[lib->global_count];
        uint64_t addr;
        if (!g->name)
            continue;
        if (!(dst->name = strdup(g->name)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        lib->global_count++;
        /* a zero-sized global still gets a distinct address */
        int rc = cr__mem_alloc(g->size ? g->size : 1, CR__ALLOC_GLOBAL, &addr);
        if (rc != 0)
            return cr__error_to_cuda(rc);
        dst->address = addr;
        dst->size = g->size;
        if (g->init && g->size)
            memcpy((void *)(uintptr_t)addr, g->init, g->size);
        else
            memset((void *)(uintptr_t)addr, 0, g->size ? g->size : 1);
    }
    return CUDA_SUCCESS;
}

/* Says what an image that the device cannot load holds: the program (or library) then fails
 * in a way whose cause is far from the load, and the compute capability is a server option.
 * One line: the entries and the first kernel. */
static void say_no_binary(const cr_image_t *img)
{
    char entries[160] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < img->entry_count && used < sizeof entries - 24; i++) {
        const cr_image_entry_t *e = &img->entries[i];
        int n = snprintf(entries + used, sizeof entries - used, "%s%s_%u%s", used ? " " : "",
                         e->kind == CR_IMAGE_PTX ? "compute" : "sm", e->arch,
                         e->arch_suffix == 'a'   ? "a"
                         : e->arch_suffix == 'f' ? "f"
                                                 : "");
        if (n > 0)
            used += (size_t)n;
    }
    CR_WARN("emu: no code a compute capability %u.%u device can load in an image of %u kernels "
            "(%s%s%s): CUDA_ERROR_NO_BINARY_FOR_GPU",
            cr__emu.sm / 10, cr__emu.sm % 10, img->kernel_count, used ? entries : "no entries",
            img->kernel_count ? ", first " : "", img->kernel_count ? img->kernels[0].name : "");
}

/* Parses and loads an image. On success *out is the library with one reference for the
 * caller (to drop once its handles are handed out). */
static CUresult load_image(const void *code, int as_library, cr__library_t **out)
{
    const void *start;
    size_t size;
    cr_image_kind_t kind;
    cr_image_t *img = NULL;
    cr__library_t *lib = NULL;
    CUresult rc;
    int err;
    if (!code)
        return CUDA_ERROR_INVALID_VALUE;
    if ((err = cr_image_measure(code, &start, &size, &kind)) != 0)
        return err == CR_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_IMAGE;
    if ((err = cr_image_parse(start, size, &img)) != 0)
        return err == CR_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_IMAGE;
    const cr_image_entry_t *entry = cr_image_select(img, cr__emu.sm);
    if (!entry) {
        say_no_binary(img);
        cr_image_free(img);
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    lib = calloc(1, sizeof *lib);
    if (!lib || pthread_mutex_init(&lib->ptx_lock, NULL) != 0) {
        free(lib);
        cr_image_free(img);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cr__obj_init(&lib->obj, library_release);
    lib->image = img;
    lib->entry = entry;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (img->kernel_count) {
        lib->kernels = calloc(img->kernel_count, sizeof *lib->kernels);
        if (!lib->kernels)
            goto fail;
    }
    lib->kernel_count = img->kernel_count;
    for (uint32_t i = 0; i < lib->kernel_count; i++) {
        cr__kernel_t *k = &lib->kernels[i];
        int static_shared = (int)img->kernels[i].static_shared_bytes;
        k->lib = lib;
        k->info = &img->kernels[i];
        atomic_init(&k->max_dynamic_shared, static_shared < CR__SHARED_PER_BLOCK
                                                ? CR__SHARED_PER_BLOCK - static_shared
                                                : 0);
        atomic_init(&k->carveout, -1);
    }
    if ((rc = create_globals(lib)) != CUDA_SUCCESS)
        goto fail;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (as_library && !(lib->lib_handle = cr__handle_new(CR__H_LIBRARY, &lib->obj, lib)))
        goto fail;
    if (!(lib->mod_handle = cr__handle_new(CR__H_MODULE, &lib->obj, lib)))
        goto fail;
    for (uint32_t i = 0; i < lib->kernel_count; i++) {
        cr__kernel_t *k = &lib->kernels[i];
        if (as_library && !(k->kernel_handle = cr__handle_new(CR__H_KERNEL, &lib->obj, k)))
            goto fail;
        if (!(k->func_handle = cr__handle_new(CR__H_FUNCTION, &lib->obj, k)))
            goto fail;
    }
    CR_DEBUG("emu: loaded %s image: %u kernels, %u globals, sm_%u %s",
             as_library ? "library" : "module", lib->kernel_count, lib->global_count, entry->arch,
             entry->kind == CR_IMAGE_PTX ? "PTX" : "cubin");
    *out = lib;
    return CUDA_SUCCESS;
fail:
    library_unload(lib);
    cr__obj_unref(&lib->obj);
    return rc;
}

CUresult cr_emu_cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions)
{
    cr__library_t *lib;
    CR__ENTER();
    if (!library || !code)
        return CUDA_ERROR_INVALID_VALUE;
    if (numJitOptions && (!jitOptions || !jitOptionsValues))
        return CUDA_ERROR_INVALID_VALUE;
    if (numLibraryOptions && (!libraryOptions || !libraryOptionValues))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numLibraryOptions; i++)
        if ((unsigned)libraryOptions[i] >= CU_LIBRARY_NUM_OPTIONS)
            return CUDA_ERROR_INVALID_VALUE;
    /* JIT options only tune a compilation that does not happen here. */
    CUresult rc = load_image(code, 1, &lib);
    if (rc != CUDA_SUCCESS)
        return rc;
    *library = (CUlibrary)(uintptr_t)lib->lib_handle;
    cr__obj_unref(&lib->obj);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                   CUjit_option *options, void **optionValues)
{
    cr__library_t *lib;
    CR__ENTER();
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if (numOptions && (!options || !optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = load_image(image, 0, &lib);
    if (rc != CUDA_SUCCESS)
        return rc;
    *module = (CUmodule)(uintptr_t)lib->mod_handle;
    cr__obj_unref(&lib->obj);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuModuleLoadData(CUmodule *module, const void *image)
{
    return cr_emu_cuModuleLoadDataEx(module, image, 0, NULL, NULL);
}

CUresult cr_emu_cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return cr_emu_cuModuleLoadDataEx(module, fatCubin, 0, NULL, NULL);
}

static cr__library_t *lib_get(uint64_t h, cr__htype_t type, cr__obj_t **owner)
{
    return cr__handle_get(h, CR__HMASK(type), owner, NULL);
}

#define H(x) ((uint64_t)(uintptr_t)(x))

CUresult cr_emu_cuLibraryUnload(CUlibrary library)
{
    cr__obj_t *owner;
    CR__ENTER();
    cr__library_t *lib = lib_get(H(library), CR__H_LIBRARY, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    if (cr__handle_del(H(library), CR__HMASK(CR__H_LIBRARY)) != 0) { /* lost a race */
        cr__obj_unref(owner);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    library_unload(lib);
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuModuleUnload(CUmodule hmod)
{
    cr__obj_t *owner;
    CR__ENTER();
    cr__library_t *lib = lib_get(H(hmod), CR__H_MODULE, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    /* The module of a library goes with the library (cuLibraryUnload). */
    if (lib->lib_handle || cr__handle_del(H(hmod), CR__HMASK(CR__H_MODULE)) != 0) {
        cr__obj_unref(owner);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    library_unload(lib);
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

static cr__kernel_t *kernel_by_name(cr__library_t *lib, const char *name)
{
    const cr_kernel_info_t *info = cr_image_kernel(lib->image, name);
    if (!info)
        return NULL;
    return &lib->kernels[info - lib->image->kernels];
}

static const cr__global_t *global_by_name(const cr__library_t *lib, const char *name)
{
    for (uint32_t i = 0; i < lib->global_count; i++)
        if (strcmp(lib->globals[i].name, name) == 0)
            return &lib->globals[i];
    return NULL;
}

CUresult cr_emu_cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    cr__obj_t *owner;
    CR__ENTER();
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    cr__library_t *lib = lib_get(H(library), CR__H_LIBRARY, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    cr__kernel_t *k = kernel_by_name(lib, name);
    if (k)
        *pKernel = (CUkernel)(uintptr_t)k->kernel_handle;
    cr__obj_unref(owner);
    return k ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cr_emu_cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    cr__obj_t *owner;
    CR__ENTER();
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    cr__library_t *lib = lib_get(H(hmod), CR__H_MODULE, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    cr__kernel_t *k = kernel_by_name(lib, name);
    if (k)
        *hfunc = (CUfunction)(uintptr_t)k->func_handle;
    cr__obj_unref(owner);
    return k ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, uint64_t h, cr__htype_t type,
                           const char *name)
{
    cr__obj_t *owner;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    cr__library_t *lib = lib_get(h, type, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    const cr__global_t *g = global_by_name(lib, name);
    if (g) {
        if (dptr)
            *dptr = g->address;
        if (bytes)
            *bytes = g->size;
    }
    cr__obj_unref(owner);
    return g ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cr_emu_cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                   const char *name)
{
    CR__ENTER();
    return get_global(dptr, bytes, H(library), CR__H_LIBRARY, name);
}

CUresult cr_emu_cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                     const char *name)
{
    CR__ENTER();
    return get_global(dptr, bytes, H(hmod), CR__H_MODULE, name);
}

CUresult cr_emu_cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    cr__obj_t *owner;
    CR__ENTER();
    if (!pMod)
        return CUDA_ERROR_INVALID_VALUE;
    cr__library_t *lib = lib_get(H(library), CR__H_LIBRARY, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    *pMod = (CUmodule)(uintptr_t)lib->mod_handle;
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib_h)
{
    cr__obj_t *owner;
    CR__ENTER();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    cr__library_t *lib = lib_get(H(lib_h), CR__H_LIBRARY, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    *count = lib->kernel_count;
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
                                          CUlibrary lib_h)
{
    cr__obj_t *owner;
    CR__ENTER();
    if (!kernels && numKernels)
        return CUDA_ERROR_INVALID_VALUE;
    cr__library_t *lib = lib_get(H(lib_h), CR__H_LIBRARY, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < numKernels && i < lib->kernel_count; i++)
        kernels[i] = (CUkernel)(uintptr_t)lib->kernels[i].kernel_handle;
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    cr__obj_t *owner;
    CR__ENTER();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    cr__library_t *lib = lib_get(H(mod), CR__H_MODULE, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    *count = lib->kernel_count;
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                                           CUmodule mod)
{
    cr__obj_t *owner;
    CR__ENTER();
    if (!functions && numFunctions)
        return CUDA_ERROR_INVALID_VALUE;
    cr__library_t *lib = lib_get(H(mod), CR__H_MODULE, &owner);
    if (!lib)
        return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < numFunctions && i < lib->kernel_count; i++)
        functions[i] = (CUfunction)(uintptr_t)lib->kernels[i].func_handle;
    cr__obj_unref(owner);
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    CR__ENTER_INIT();
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_EAGER_LOADING; /* everything is ready once loaded */
    return CUDA_SUCCESS;
}

/* ---- kernels and functions ---- */

cr__kernel_t *cr__kernel_get(uint64_t handle, cr__obj_t **owner)
{
    return cr__handle_get(handle, CR__HMASK(CR__H_KERNEL) | CR__HMASK(CR__H_FUNCTION), owner, NULL);
}

int cr__kernel_max_threads(const cr__kernel_t *k)
{
    int max = CR__MAX_THREADS_PER_BLOCK;
    if (k->info->max_threads_per_block && (int)k->info->max_threads_per_block < max)
        max = (int)k->info->max_threads_per_block;
    if (k->info->num_regs) {
        /* registers are allocated per warp in units of 256 */
        int per_warp =
            (int)cr__round_up((uint64_t)k->info->num_regs * CR__WARP, CR__REG_ALLOC_UNIT);
        int threads = CR__REGS_PER_BLOCK / per_warp * CR__WARP;
        if (threads < max)
            max = threads;
    }
    return max;
}

/* The PTX ISA version the kernel came from: the PTX entry loaded, else the newest PTX entry
 * of the image the device could load, else the cubin's arch. */
static int ptx_version(const cr__library_t *lib)
{
    unsigned best = 0;
    if (lib->entry->kind == CR_IMAGE_PTX)
        return (int)lib->entry->arch;
    for (uint32_t i = 0; i < lib->image->entry_count; i++) {
        const cr_image_entry_t *e = &lib->image->entries[i];
        if (e->kind == CR_IMAGE_PTX && e->arch <= cr__emu.sm && e->arch > best)
            best = e->arch;
    }
    return (int)(best ? best : lib->entry->arch);
}

CUresult cr__kernel_attribute(const cr__kernel_t *k, CUfunction_attribute attrib, int *value)
{
    const cr_kernel_info_t *info = k->info;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = cr__kernel_max_threads(k);
        break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *value = (int)info->static_shared_bytes;
        break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
        *value = (int)info->const_bytes;
        break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        *value = (int)info->local_bytes;
        break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *value = (int)info->num_regs;
        break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        *value = ptx_version(k->lib);
        break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *value = k->lib->entry->kind == CR_IMAGE_ELF ? (int)k->lib->entry->arch : (int)cr__emu.sm;
        break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
        *value = 0;
        break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *value = atomic_load(&k->max_dynamic_shared);
        break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        *value = atomic_load(&k->carveout);
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
        *value = 0;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        *value =
            atomic_load(&k->required_cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH]);
        break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        *value = atomic_load(&k->non_portable_cluster);
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        *value = atomic_load(&k->cluster_policy);
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult kernel_set_attribute(cr__kernel_t *k, CUfunction_attribute attrib, int value)
{
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (value < 0 || (int64_t)value + k->info->static_shared_bytes > CR__SHARED_PER_BLOCK_OPTIN)
            return CUDA_ERROR_INVALID_VALUE;
        atomic_store(&k->max_dynamic_shared, value);
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (value < -1 || value > 100)
            return CUDA_ERROR_INVALID_VALUE;
        atomic_store(&k->carveout, value);
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        if (value < 0 || value > 16)
            return CUDA_ERROR_INVALID_VALUE;
        atomic_store(&k->required_cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH],
                     value);
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        if (value != 0 && value != 1)
            return CUDA_ERROR_INVALID_VALUE;
        atomic_store(&k->non_portable_cluster, value);
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        if (value < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
            value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
            return CUDA_ERROR_INVALID_VALUE;
        atomic_store(&k->cluster_policy, value);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Looks up a CUkernel or CUfunction, runs `body` with `k`, then drops the reference. */
#define WITH_KERNEL(handle, body)                                                                  \
    do {                                                                                           \
        cr__obj_t *owner_;                                                                         \
        cr__kernel_t *k = cr__kernel_get(H(handle), &owner_);                                      \
        if (!k)                                                                                    \
            return CUDA_ERROR_INVALID_HANDLE;                                                      \
        CUresult rc_ = CUDA_SUCCESS;                                                               \
        body;                                                                                      \
        cr__obj_unref(owner_);                                                                     \
        return rc_;                                                                                \
    } while (0)

CUresult cr_emu_cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    CR__ENTER();
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(kernel, *pFunc = (CUfunction)(uintptr_t)k->func_handle);
}

CUresult cr_emu_cuKernelGetName(const char **name, CUkernel hfunc)
{
    CR__ENTER();
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(hfunc, *name = k->info->name);
}

CUresult cr_emu_cuFuncGetName(const char **name, CUfunction hfunc)
{
    CR__ENTER();
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(hfunc, *name = k->info->name);
}

CUresult cr_emu_cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    CR__ENTER();
    if (!pLib)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(kernel, {
        if (k->lib->lib_handle)
            *pLib = (CUlibrary)(uintptr_t)k->lib->lib_handle;
        else
            rc_ = CUDA_ERROR_INVALID_HANDLE;
    });
}

CUresult cr_emu_cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    CR__ENTER();
    if (!hmod)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(hfunc, *hmod = (CUmodule)(uintptr_t)k->lib->mod_handle);
}

CUresult cr_emu_cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                     CUdevice dev)
{
    CR__ENTER();
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    WITH_KERNEL(kernel, rc_ = cr__kernel_attribute(k, attrib, pi));
}

CUresult cr_emu_cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    CR__ENTER();
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(hfunc, rc_ = cr__kernel_attribute(k, attrib, pi));
}

CUresult cr_emu_cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                     CUdevice dev)
{
    CR__ENTER();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    WITH_KERNEL(kernel, rc_ = kernel_set_attribute(k, attrib, val));
}

CUresult cr_emu_cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    CR__ENTER();
    WITH_KERNEL(hfunc, rc_ = kernel_set_attribute(k, attrib, value));
}

CUresult cr_emu_cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    CR__ENTER();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(kernel, atomic_store(&k->cache_config, (int)config));
}

CUresult cr_emu_cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    CR__ENTER();
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(hfunc, atomic_store(&k->cache_config, (int)config));
}

static CUresult param_info(const cr__kernel_t *k, size_t index, size_t *offset, size_t *size)
{
    if (index >= k->info->param_count)
        return CUDA_ERROR_INVALID_VALUE;
    *offset = k->info->params[index].offset;
    if (size)
        *size = k->info->params[index].size;
    return CUDA_SUCCESS;
}

CUresult cr_emu_cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                     size_t *paramSize)
{
    CR__ENTER();
    if (!paramOffset)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(kernel, rc_ = param_info(k, paramIndex, paramOffset, paramSize));
}

CUresult cr_emu_cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                   size_t *paramSize)
{
    CR__ENTER();
    if (!paramOffset)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(func, rc_ = param_info(k, paramIndex, paramOffset, paramSize));
}

CUresult cr_emu_cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
    CR__ENTER();
    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_KERNEL(function, *state = CU_FUNCTION_LOADING_STATE_LOADED);
}

CUresult cr_emu_cuFuncLoad(CUfunction function)
{
    CR__ENTER();
    WITH_KERNEL(function, (void)k);
}

/* ---- for the launch hook ---- */

int cr_emu_launch_global(const cr_emu_launch_t *launch, const char *name, uint64_t *address,
                         uint64_t *size)
{
    const cr__library_t *lib = launch ? launch->library : NULL;
    if (!lib || !name)
        return CR_EINVAL;
    return cr__library_global(lib, name, address, size);
}

int cr__library_global(const cr__library_t *lib, const char *name, uint64_t *address,
                       uint64_t *size)
{
    const cr__global_t *g = global_by_name(lib, name);
    if (!g)
        return CR_ENOTFOUND;
    if (address)
        *address = g->address;
    if (size)
        *size = g->size;
    return 0;
}
