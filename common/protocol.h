/* Messages whose bodies are built by hand (annotated `custom`, plus the '@' protocol
 * messages). Generically marshalled calls are described by common/api.h. Each body is a
 * msgpack array; "stream" is a stream id (0 = the session's legacy default stream).
 * Replies are [CUresult, ...] unless stated otherwise.
 *
 * @hello               client -> server, waits
 *   body  map {protocol, cuda_version, client, pid, host, program, token (str or nil)}
 *   reply [CUresult, map {protocol, server, backend, driver_version, session,
 *          devices: [{name, uuid (bin 16), total_mem, attributes: [int...] indexed by
 *          CUdevice_attribute}], device_windows: [[base, size]...],
 *          host_window: [base, size]: where the server maps shared regions at the
 *          client's own addresses (size 0: nowhere), which the client reserves too,
 *          export_tables: [[uuid (bin 16), size in bytes (0: unknown)]...]: the private
 *          export tables the server's driver has (of those common/export_tables.h lists)}]
 *          or [error, "reason"] when refused
 *
 * @host_func           server -> client: run the host function registered for call_id
 *                      (body []), or the one kept under the host id of its body [host id]
 * @host_func_done      client -> server: it returned (call_id of the launch)
 * @d2h_data            server -> client: bulk bytes of the asynchronous device-to-host
 *                      copy with this call_id, in order; CR_FRAME_PARTIAL until the last
 * @context_error       server -> client: body [CUresult] or [CUresult, reason]: a kernel
 *                      fault broke the client's context; every later call fails with it,
 *                      as on a GPU. With a reason (the device context every session
 *                      shares was lost), the client prints it; the server then closes
 *                      the connection
 * @device_output       server -> client: bulk: device printf text, to the client's stdout,
 *                      sent before anything that reports the stream's work complete
 * @goodbye             reserved, unused
 * @shm_attach          client -> server, waits; Unix sockets only. The frame carries a
 *                      memfd (SCM_RIGHTS), sealed against shrinking, that the server maps
 *   body  [region id (client-chosen, not 0), size] or [id, size, 1]: at the host window
 *   reply [CUresult]     CUDA_ERROR_NOT_SUPPORTED: no shared memory here (--no-shm, TCP,
 *                        no descriptor); the client then moves its bytes over the socket
 *         [CUresult, address, device address] when asked for the host window: the client
 *                        maps the region at address (0: wherever it likes); the device
 *                        reaches it at device address (0: it does not)
 * @shm_detach          client -> server, waits; body [region id]: once the session's
 *                      streams are done with it, the server unmaps the region
 * @status              client -> server, waits; body []   (`cuda-remote status`)
 *   reply [CUresult, map {server: {version, backend, device, memory_total, memory_used,
 *          uptime_s, restarts (server processes started afresh after a lost context),
 *          tenants_file}, self: the caller's session id,
 *          tenants: [{name, quota (0: none), used, weight, priority, admin, removed,
 *                     sessions, sessions_total, queued, share (of the device time used
 *                     lately, 0 to 1), inflight (launches on the device), launches,
 *                     bytes_h2d, bytes_d2h, errors, device_ns}],
 *          sessions: [{id, tenant, who, peer, memory, requests, queued, connected_ns
 *                      (CLOCK_REALTIME), launches, bytes_h2d, bytes_d2h, errors,
 *                      device_ns}]}]
 *          the caller's own tenant and its sessions; every one for an admin tenant
 * @nvml                client -> server, waits; body [parts: CR_NVML_* of nvml_view.h]
 *   reply [CUresult, map {identity: name, uuid (bin 16), serial, backend, driver_version,
 *          cuda_version, pci_bus_id, pci_domain, pci_bus, pci_device, pci_device_id,
 *          pci_subsystem_id, cc_major, cc_minor;
 *          usage: memory_total, memory_used, memory_free (what cuMemGetInfo gives the
 *          caller's tenant), utilization (percent of the device time its tenant had
 *          lately), processes: [[pid, device memory, program]...] (the sessions of the
 *          caller's tenant, every tenant's for an admin, that made a driver call);
 *          sensors: {key: integer} (those the device could read; keys in nvml_view.h)}]
 *          each part only when asked for
 *
 * cuMemcpyHtoD_v2 (waits) / cuMemcpyHtoDAsync_v2 (async)
 *   body  [dst, bytes, stream]   bulk: the bytes. A large copy is several frames, each
 *         for the next chunk; a waiting copy's last frame has the waiting opcode.
 * cuMemcpyDtoH_v2 (waits)
 *   body  [src, bytes, stream]   reply [CUresult]; bulk: the bytes, possibly spread over
 *         several reply frames marked CR_FRAME_PARTIAL before the last
 * cuMemcpyDtoHAsync_v2 (async, destination page-locked)
 *   body  [src, bytes, stream]   the data comes as @d2h_data frames for this call_id
 * The same four with the host side in an attached region instead of on the wire:
 *   body  [device address, bytes, stream, region id, offset]   no bulk either way; a
 *         waiting request is answered once the copy completed on its stream, with
 *         reply [CUresult]; an asynchronous one sends nothing more
 * cuMemcpy3D_v2 (waits) / cuMemcpy3DAsync_v2 (async; device-to-host only into
 * page-locked memory): every 2D and 3D copy
 *   body  [direction, stream, width_bytes, height, depth, src, dst]
 *         direction CR_COPY_HTOD / DTOH / DTOD; src and dst [device_address, x_bytes, y, z,
 *         pitch, slice_height] for device sides, nil for the host side, whose rows travel
 *         packed (width_bytes each) as the bulk of the request (HtoD) or of the reply or
 *         @d2h_data frames (DtoH)
 *
 * cuLibraryLoadData (waits)
 *   body  [kind]                 bulk: the code image (fatbin, cubin or PTX, NUL included)
 *   reply [CUresult, library id]
 * cuModuleLoadData (waits)       same, reply [CUresult, module id]
 *
 * The JIT linker (all wait; options [[CUjit_option, number] ...], log buffers as 0 with
 * their sizes, see common/jit_options.h):
 * cuLinkCreate_v2    body [options]                 reply [CUresult, link id]
 * cuLinkAddData_v2   body [link id, CUjitInputType, name, options]   bulk: the input
 *                    reply [CUresult, info log, error log]
 * cuLinkComplete     body [link id]   reply [CUresult, info log, error log, wall ms (float),
 *                    threads per block used]; bulk on success: the linked image
 * cuLinkDestroy      body [link id]                 reply [CUresult] *
 * cuLaunchKernel / cuLaunchCooperativeKernel (async)
 *   body  [function or kernel id, [gx, gy, gz], [bx, by, bz], shared_bytes, stream,
 *          [[offset, size]...]]   bulk: the parameter buffer, each parameter at its offset
 * cuLaunchKernelEx (async)
 *   body  as cuLaunchKernel, then [[attribute id, bin value (the 64-byte value union)]...]
 *
 * cuLaunchHostFunc / cuStreamAddCallback (async)
 *   body  [stream]   the server sends @host_func with this call_id when the stream gets
 *         there, and holds the stream until @host_func_done
 *   body  [stream, host id]   a graph's host node (or a host function captured): the
 *         client keeps the function under that id; at each launch the server sends
 *         @host_func with a call_id of its own (from 2^62 up) and body [host id]
 *
 * cuCtxSynchronize_v2 (waits)           body []       every stream of the session
 * cuDevicePrimaryCtxReset_v2 (waits)    body [device] frees the session's memory, streams
 *                                       and events; libraries and modules stay
 * cuMemPoolGetAttribute / cuMemPoolSetAttribute (waits)
 *   body  [pool, attribute(, value)]    reply [CUresult(, value)] (u64 for every attribute)
 * cuOccupancyMaxPotentialBlockSizeWithFlags (waits)
 *   body  [function, [dynamic shared bytes for block sizes 32, 64, ... 1024], block_limit,
 *          flags]   reply [CUresult, min_grid_size, block_size]
 *
 * cuTensorMapEncodeTiled (waits)
 *   body  [data type, rank, global address, global dims (bin, rank x u64), global strides
 *          (bin, (rank - 1) x u64), box dims (bin, rank x u32), element strides (bin,
 *          rank x u32), interleave, swizzle, l2 promotion, oob fill]
 *   reply [CUresult, bin 128: the CUtensorMap] on success, [CUresult] otherwise
 *         bins hold the arrays' raw little-endian bytes; each must have exactly its rank's
 *         length (rank 1 to 5). The server refuses (CUDA_ERROR_INVALID_VALUE) a tensor whose
 *         extent, from the dims, the strides and the data type's element size, does not lie
 *         in one allocation or global of the session
 * cuTensorMapEncodeIm2col (waits)
 *   body  [data type, rank, global address, global dims, global strides, pixel box lower
 *          corner (bin, (rank - 2) x i32), pixel box upper corner (bin, same), channels per
 *          pixel, pixels per column, element strides, interleave, swizzle, l2 promotion,
 *          oob fill]   rank 3 to 5; the rest and the reply as cuTensorMapEncodeTiled
 */
#ifndef CR_PROTOCOL_H
#define CR_PROTOCOL_H

#include <cuda.h>

enum { CR_COPY_HTOD = 1, CR_COPY_DTOH = 2, CR_COPY_DTOD = 3 };

/* Memory-pool attribute values are cuuint64_t for these and int for the others. */
static inline int cr_mempool_attr_is_64(int attr)
{
    return attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD ||
           attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ||
           attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ||
           attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH;
}

/* Handle ids from here up are chosen by the client, for handles that asynchronous calls
 * create (common/api.h: an OUT_HANDLE of an async call); the server's own ids stay below. */
#define CR_CLIENT_ID_BASE ((uint64_t)1 << 62)

/* Copies larger than this travel as several frames so that no frame needs a huge buffer
 * and the server can start copying before the last byte arrives. */
#define CR_COPY_CHUNK ((size_t)8 << 20)
/* A launch names at most this many parameters (a kernel's parameters fill at most 32764
 * bytes, so even one-byte parameters fit). */
#define CR_MAX_LAUNCH_PARAMS 32768u
/* A launch's parameter buffer, at most (a kernel's parameters fill at most 32764 bytes; the
 * rest is room for a layout the server refuses with a reason). */
#define CR_MAX_LAUNCH_PARAM_BYTES ((uint64_t)1 << 20)
/* Before its hello admits it, a client may send one hello of at most this many bytes (a
 * hello is a few hundred) and nothing else. */
#define CR_HELLO_MAX_BODY (64u << 10)
/* A 2D/3D copy message moves at most this many bytes of rows (the server stages or
 * buffers them at once); the client splits larger copies. */
#define CR_COPY3D_MAX_BYTES ((uint64_t)64 << 20)

#endif
