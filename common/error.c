/* Messages for the CR_E* codes, generated from the one list in error.h. */
#include "error.h"

const char *cr_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define CR_ERROR_CASE(name, value, msg)                                                            \
    case value:                                                                                    \
        return msg;
        CR_ERRNO_MAP(CR_ERROR_CASE)
#undef CR_ERROR_CASE
    }
    return "unknown error";
}
