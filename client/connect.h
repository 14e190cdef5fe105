/* Connecting: the server's address, the connection, and the hello that describes the
 * server (connect.c). */
#ifndef CR_CONNECT_H
#define CR_CONNECT_H

#include "client.h"

/* Connects to the server at `address` and says hello: on success cl holds the connection
 * and everything the hello described. On failure it says why once on stderr and returns
 * CUDA_ERROR_NO_DEVICE, what cudart expects of a driver without a device. */
CUresult cr_connect(cr_client_t *cl, const char *address);

#endif
