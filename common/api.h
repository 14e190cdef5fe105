/* Descriptors of remoted driver functions, shared by client and server.
 *
 * codegen/generate.py turns the manifest and codegen/annotations.txt into one descriptor
 * per remoted function (cr_api_desc.c in the build tree). The client's generic marshaller
 * (client/marshal.c) and the server's (server/marshal.c) both interpret them, so the wire
 * format of a call is written down exactly once.
 *
 * A call body is a msgpack array with one element per parameter, in order:
 *   VAL, DPTR            integer                 FLOAT   float/double
 *   HANDLE               integer id (0 = NULL)    STREAM  integer id (0 = legacy stream)
 *   OUT, OUT_STR,        nil if the caller passed NULL, else true / the capacity
 *   OUT_ARRAY            (an OUT_HANDLE of an async call: the id the client chose for it)
 *   IN, IN_ARRAY, STR    nil or bin / str
 *   INOUT                nil or bin (the value going in)
 *   IGNORED              nil
 * A reply body is [CUresult, outputs...] with one element per OUT*, INOUT parameter in
 * order (nil where the caller passed NULL or the call failed): OUT integers and floats as
 * msgpack numbers, OUT_HANDLE as an id, OUT structs (CR_PF_BYTES), INOUT and OUT_ARRAY as
 * bin, OUT_STR as str. */
#ifndef CR_API_H
#define CR_API_H

#include <stdint.h>

typedef enum {
    CR_P_VAL = 1,    /* integer or enum by value */
    CR_P_FLOAT,      /* float or double by value */
    CR_P_DPTR,       /* CUdeviceptr by value */
    CR_P_HANDLE,     /* opaque handle by value (a session handle id on the wire) */
    CR_P_STREAM,     /* CUstream by value: NULL/legacy/per-thread resolved by the client */
    CR_P_OUT,        /* pointer to one value the callee writes */
    CR_P_OUT_HANDLE, /* pointer to one handle the callee writes */
    CR_P_INOUT,      /* pointer to one value read and written */
    CR_P_IN,         /* const pointer to one POD value or struct */
    CR_P_IN_ARRAY,   /* const pointer to count elements */
    CR_P_OUT_ARRAY,  /* pointer to count elements the callee writes */
    CR_P_STR,        /* const char *, NUL-terminated */
    CR_P_OUT_STR,    /* char * buffer of count bytes the callee fills */
    CR_P_IGNORED,    /* not sent: the server passes NULL / 0 */
} cr_param_kind_t;

enum {
    CR_PF_SIGNED = 1u << 0,  /* VAL, OUT: a signed integer */
    CR_PF_DESTROY = 1u << 1, /* HANDLE: the call destroys it on success */
    CR_PF_FLOAT = 1u << 2,   /* OUT: a float or double (by size) */
    CR_PF_BYTES = 1u << 3,   /* OUT: a struct or array, sent as bin */
    CR_PF_CREATE = 1u << 4,  /* OUT_HANDLE: the call creates it: the session owns it */
};

/* How far a call reaches from a DPTR parameter (annotations first, extent[], rows[]): the
 * server checks that the caller owns every byte of it. */
typedef enum {
    CR_EXTENT_NONE = 0, /* not a device pointer */
    CR_EXTENT_FIRST,    /* the byte it points at */
    CR_EXTENT_COUNT,    /* count_param elements of extent_elem bytes (none: its first byte) */
    CR_EXTENT_ROWS,     /* extent_rows rows extent_pitch bytes apart, each count_param
                           elements of extent_elem bytes */
    CR_EXTENT_ADDRESS,  /* an address range of the virtual-memory API, no memory the call
                           reaches: the function's hand-written server handler checks it
                           against the session's reservations and mappings */
} cr_extent_kind_t;

/* The values an enum of cuda.h has (cr_enum_<name> in the generated cr_api_desc.h). */
typedef struct {
    const int64_t *values;
    uint16_t count;
} cr_enum_values_t;

static inline int cr_enum_has(const cr_enum_values_t *e, int64_t v)
{
    for (uint16_t i = 0; i < e->count; i++)
        if (e->values[i] == v)
            return 1;
    return 0;
}

typedef struct {
    uint8_t kind;        /* cr_param_kind_t */
    uint8_t flags;       /* CR_PF_* */
    uint8_t handle_type; /* cr_handle_type_t, for HANDLE / OUT_HANDLE */
    int8_t count_param;  /* arrays and OUT_STR: index of the parameter holding the count;
                            DPTR: of its element count or row width */
    uint32_t size;       /* bytes of one value or element */
    uint8_t extent;      /* DPTR: cr_extent_kind_t */
    uint8_t extent_elem; /* DPTR: bytes of one counted element */
    int8_t extent_pitch; /* DPTR rows: index of the parameter holding the pitch */
    int8_t extent_rows;  /* DPTR rows: index of the parameter holding the row count */
    /* VAL of an enum type: its values (from cuda.h), the only ones the server passes on to
     * the driver, which may not check (NVIDIA's crashed on a function attribute of -1) */
    const cr_enum_values_t *values;
} cr_param_desc_t;

enum {
    CR_FN_ASYNC = 1u << 0, /* sent without waiting; errors surface at the next waiting call */
    CR_FN_WAITS = 1u << 1, /* may wait on the device: the server runs it off its executor */
    /* The function works on the default stream, which its parameters do not name: the
     * client appends that stream (legacy or per-thread) as a last STREAM parameter and the
     * server calls the function's stream-ordered sibling (annotation via=NAME). */
    CR_FN_IMPLICIT_STREAM = 1u << 2,
};

typedef struct {
    const char *name;
    uint16_t opcode;
    uint8_t flags; /* CR_FN_* */
    uint8_t param_count;
    const cr_param_desc_t *params;
} cr_fn_desc_t;

/* One argument of a call, as the generated stubs hand it to the marshallers. */
typedef union {
    uint64_t u;
    int64_t i;
    double d;
    float f;
    void *p;
} cr_arg_t;

#define CR_MAX_PARAMS 24
/* Upper bound on elements of an array parameter and bytes of a string, checked on both
 * sides before anything is allocated. */
#define CR_MAX_ARRAY_BYTES ((uint32_t)2 << 20)

#endif
