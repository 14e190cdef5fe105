/* The hello, shared by admission.c (loop) and hello.c (executor). */
#ifndef CR_SERVER_HELLO_H
#define CR_SERVER_HELLO_H

#include <msgpack.h>

#include "request.h"

/* A field of the hello's map as text fit for the log (a number printed, control characters
 * replaced); "" when absent. */
void cr_hello_field(char *dst, size_t cap, const msgpack_object *map, const char *key);
/* Answers a hello with a refusal and its reason. */
void cr_hello_refuse(cr_request_t *req, CUresult r, const char *why);

#endif
