/* Error codes of cuda-remote's own code paths.
 *
 * Functions return 0 on success and a negative CR_E* code on failure. CUDA results
 * (CUresult) are a separate space: they cross the wire as values, and no CR_E* code does.
 * There is no one mapping between them. The stub turns a failure of its connection into the
 * CUresult the call returns in cr_transport_error (client/request.c); the emulated device
 * maps its internal codes in cr__error_to_cuda (server/emu/device.c). The server's handlers
 * answer with the CUresult each failed check calls for, and a CR_E* code from reading a
 * client (a malformed frame or request) closes that client's connection instead. A few
 * callers choose the CUresult for one code themselves (client/memory.c: CR_EEXISTS). */
#ifndef CR_ERROR_H
#define CR_ERROR_H

/* X(name, value, message) */
#define CR_ERRNO_MAP(X)                                                                            \
    X(NOMEM, -1, "out of memory")                                                                  \
    X(INVAL, -2, "invalid argument")                                                               \
    X(PROTO, -3, "protocol violation")                                                             \
    X(TOOBIG, -4, "length or count over its limit")                                                \
    X(IO, -5, "input/output error")                                                                \
    X(CLOSED, -6, "connection closed")                                                             \
    X(CONNREFUSED, -7, "connection refused")                                                       \
    X(NOTFOUND, -8, "not found")                                                                   \
    X(UNSUPPORTED, -9, "not supported")                                                            \
    X(CORRUPT, -10, "malformed input")                                                             \
    X(VERSION, -11, "version mismatch")                                                            \
    X(EXISTS, -12, "already exists")                                                               \
    X(TIMEDOUT, -13, "timed out")                                                                  \
    X(BUSY, -14, "busy")                                                                           \
    X(BROKEN, -15, "the CUDA context is broken")                                                   \
    X(PERM, -16, "not permitted")

enum {
#define CR_ERROR_ENUM(name, value, msg) CR_E##name = value,
    CR_ERRNO_MAP(CR_ERROR_ENUM)
#undef CR_ERROR_ENUM
};

/* Returns a static message for a CR_E* code (or "unknown error"). */
const char *cr_strerror(int err);

#endif
