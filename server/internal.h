/* Every interface of cuda-remoted's modules at once, for the files that have not named
 * the ones they use yet. */
#ifndef CR_SERVER_INTERNAL_H
#define CR_SERVER_INTERNAL_H

#include "address.h"
#include "backend.h"
#include "buffers.h"
#include "guard.h"
#include "handlers.h"
#include "loop.h"
#include "scheduler.h"
#include "session.h"
#include "shm.h"
#include "status.h"
#include "tenants.h"
#include "waiter.h"

#endif
