/* The host window (host_window.c): a range of the server's address space, reserved at
 * start, where clients' shared regions are mapped at the same address they have in the
 * client. Page-locked host memory is then at one address in both processes, and with
 * unified addressing its device address is that address too: a kernel reads and writes the
 * client's memory through the pointer the client holds (mapped host memory). Clients
 * reserve the same range at connect (the hello names it) and map a region where the
 * server placed it. Threads: any; one lock. */
#ifndef CR_SERVER_HOST_WINDOW_H
#define CR_SERVER_HOST_WINDOW_H

#include <stdint.h>

/* Reserves the window (once the backend is open, so the driver's own reservations are in
 * place); 0, or -1 when no address for it was free: page-locked memory then stays unmapped
 * to the device, and the server serves on. */
int cr_host_window_init(void);
/* The reserved window; size 0 when there is none. */
void cr_host_window_get(uint64_t *base, uint64_t *size);
/* A free, page-aligned range of `size` bytes in the window (still reserved: the caller maps
 * over it with MAP_FIXED), or 0 when none is free. */
uint64_t cr_host_window_take(uint64_t size);
/* Returns [addr, addr + size) from cr_host_window_take: its mapping is replaced by fresh
 * anonymous memory (a stale access of the emulated device reads zeros, never faults) and
 * the range may be handed out again. */
void cr_host_window_give(uint64_t addr, uint64_t size);

#endif
