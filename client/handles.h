/* The handle ids this client holds, with their types (handles.c). */
#ifndef CR_HANDLES_H
#define CR_HANDLES_H

#include <stdint.h>

/* Records a live handle. 0, or CR_ENOMEM when it could not be recorded. */
int cr_handles_add(uint64_t id, unsigned type);
/* An id for a handle an asynchronous call creates (the server registers it under it). */
uint64_t cr_handles_new_id(void);
void cr_handles_remove(uint64_t id);
/* 1 when id is a live handle of that type (a kernel counts as a function). */
int cr_handles_valid(uint64_t id, unsigned type);
/* Aliases: an address a library was handed for a function (a function object, see
 * export_tables.c) stands for that function's id in every later call. 0 or CR_ENOMEM. */
int cr_handles_alias(uint64_t alias, uint64_t id);
/* The id a handle stands for: an alias's function, else the handle itself. */
uint64_t cr_handles_resolve(uint64_t handle);
/* Forgets every handle of a type (the primary-context reset destroyed them). */
void cr_handles_forget_type(unsigned type);

#endif
