/* Backends (backend.c): NVIDIA's driver ("cuda") or the emulated device ("emu"), opened
 * once per server process; every server thread that calls the driver binds to its one
 * context first. */
#ifndef CR_SERVER_BACKEND_H
#define CR_SERVER_BACKEND_H

#include "cr_driver.h"
#include "export_tables.h"

typedef struct {
    char name[256];
    CUuuid uuid;
    size_t total_mem;
    int attrs[CU_DEVICE_ATTRIBUTE_MAX];
} cr_device_desc_t;

typedef struct {
    const char *kind; /* "cuda" or "emu" */
    char path[512];   /* the driver library (cuda) */
    cr_driver_t d;
    void *dl;
    CUdevice device;
    CUcontext ctx; /* the one context every session runs in */
    int driver_version;
    cr_device_desc_t desc;
    uint64_t window_base, window_size; /* device addresses, when the backend knows them */
    /* per table of common/export_tables.h: its size in bytes as the driver has it, 0 when
     * it has the table but says no size, -1 when it lacks it */
    int32_t export_table_size[CR_EXPORT_TABLE_COUNT];
} cr_backend_t;

typedef struct {
    const char *kind;        /* "auto", "cuda" or "emu" */
    const char *driver_path; /* NULL: search the usual places */
    int device;
    uint64_t emu_memory; /* 0: the emulated device's default */
    const char *emu_trace;
    int emu_context_faults; /* a kernel fault breaks the whole emulated context, as on a GPU */
    unsigned emu_compute_capability; /* major * 10 + minor the emulated device reports; 0: 9.0 */
} cr_backend_options_t;

int cr_backend_open(const cr_backend_options_t *opt, cr_backend_t *b, char *err, size_t err_len);
/* Fills b->export_table_size: the `cuda` backend asks its driver for each table it knows,
 * the emulated device declares the ones the stub serves for it. */
void cr_backend_describe_export_tables(cr_backend_t *b);
/* Makes the backend's context current on the calling thread (every server thread that
 * calls the driver does this first). */
void cr_backend_bind_thread(const cr_backend_t *b);
/* Whether this thread is one of the server's own bound ones (not the driver's callback
 * thread, which must not call the driver). */
int cr_backend_thread_bound(void);
/* Device printf of kernels on `stream` goes to fn(user, text, len) from the backend's threads,
 * before the work completes; release(user) once the stream is gone. The emulated device does
 * this; a GPU's printf reaches the server's stdout instead (CR_EUNSUPPORTED, release not
 * called). */
int cr_backend_capture_output(const cr_backend_t *b, void *stream,
                              void (*fn)(void *user, const char *text, size_t len),
                              void (*release)(void *user), void *user);

#endif
