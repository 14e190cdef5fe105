# The integration programs (see CMakeLists.txt): cr_cuda_program + cr_cuda_test each.
cr_cuda_program(device_props)
cr_cuda_test(device_props)
cr_cuda_program(memory)
cr_cuda_test(memory)
cr_cuda_program(streams)
cr_cuda_test(streams)
cr_cuda_program(events)
cr_cuda_test(events)
cr_cuda_program(symbols)
cr_cuda_test(symbols)
cr_cuda_program(launch_ex)
cr_cuda_test(launch_ex)
cr_cuda_program(params)
cr_cuda_test(params)
cr_cuda_program(stream_alloc)
cr_cuda_test(stream_alloc)
cr_cuda_program(threads)
cr_cuda_test(threads)
cr_cuda_program(callbacks)
cr_cuda_test(callbacks)
cr_cuda_program(reset)
cr_cuda_test(reset)
cr_cuda_program(exit_paths)
cr_cuda_test(exit_paths)
cr_cuda_test(exit_paths_unix PROGRAM exit_paths TRANSPORT unix)
cr_cuda_program(unreachable)
cr_cuda_test(unreachable SCENARIO unreachable)
cr_cuda_program(invalid_args)
cr_cuda_test(invalid_args)
cr_cuda_program(memhold)
cr_cuda_test(memhold SCENARIO sigkill)
cr_cuda_test(malformed PROGRAM device_props SCENARIO malformed)
# copies over every path: the socket (TCP; Unix without shared memory, refused by the
# client or by the server) and shared memory
cr_cuda_program(copies)
cr_cuda_test(copies)
cr_cuda_test(copies_shm PROGRAM copies TRANSPORT unix
  RUN_ARGS --expect-log "shared memory with copies")
cr_cuda_test(copies_unix_no_shm PROGRAM copies TRANSPORT unix
  RUN_ARGS --env CUDA_REMOTE_SHM=0 --reject-log "shared memory with")
cr_cuda_test(copies_server_no_shm PROGRAM copies TRANSPORT unix
  RUN_ARGS --server-arg=--no-shm --server-arg=--log=debug
           --expect-log "shared memory declined: disabled" --reject-log "shared memory with")
# a tenant's view of memory (run by tests/tenants with a tenants file)
cr_cuda_program(tenant_quota)
# mapped host memory: reached by the device when the server shares memory on this host
cr_cuda_program(mapped)
cr_cuda_test(mapped TRANSPORT unix ARGS shared)
cr_cuda_test(mapped_tcp PROGRAM mapped ARGS remote)
cr_cuda_test(mapped_unix_no_shm PROGRAM mapped TRANSPORT unix ARGS remote
  RUN_ARGS --env CUDA_REMOTE_SHM=0)
# 48 MiB a session may share: the first 16 MiB staging area and four 8 MiB buffers
cr_cuda_test(mapped_limited PROGRAM mapped TRANSPORT unix ARGS limited 4
  RUN_ARGS --server-arg=--max-shared=48MiB)
cr_cuda_program(vmm)
cr_cuda_test(vmm)
cr_cuda_program(graphs)
# graphs of kernels, memsets, copies and events run as the driver's graphs; those with host
# nodes (or nodes that fail) are replayed node by node: both forms must be taken
cr_cuda_test(graphs RUN_ARGS --server-arg=--log --server-arg=debug
  --expect-log "(?s)(?=.*runs as the driver's graph)(?=.*is replayed node by node)")
# a captured PDL launch, a programmatic edge added by hand, and programmatic dependencies
# given to a capture: their graphs are the driver's (the launch-only attribute left out,
# programmatic edges added to it)
cr_cuda_test(graphs_pdl PROGRAM graphs ARGS --pdl RUN_ARGS --server-arg=--log
  --server-arg=debug --reject-log "is replayed node by node" --expect-log
  "(?s)(?=.*graph \\(2 nodes, 2 kernels\\))(?=.*graph \\(4 nodes, 3 kernels\\))(?=.*graph \\(4 nodes, 4 kernels\\))")
cr_cuda_program(conditional)
# conditional nodes run only as the driver's graph (never replayed)
cr_cuda_test(conditional RUN_ARGS --server-arg=--log --server-arg=debug
  --expect-log "runs as the driver's graph \\([^)]*conditional nodes\\)")
cr_cuda_program(forks)
cr_cuda_test(forks)
# the JIT linker: two halves of device code compiled separately to PTX (-rdc), linked by
# the program at run time
set(cr_link_ptx "")
foreach(half caller callee)
  set(ptx ${CMAKE_CURRENT_BINARY_DIR}/link_${half}.ptx)
  add_custom_command(
    OUTPUT ${ptx}
    COMMAND ${CR_NVCC} -ptx -rdc=true -arch=compute_90 -o ${ptx}
            ${CMAKE_CURRENT_SOURCE_DIR}/link/${half}.cu
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/link/${half}.cu
    COMMENT "nvcc -ptx link/${half}.cu"
    VERBATIM)
  list(APPEND cr_link_ptx ${ptx})
endforeach()
set(cr_programs ${cr_programs} ${cr_link_ptx})
cr_cuda_program(link)
cr_cuda_test(link ARGS ${CMAKE_CURRENT_BINARY_DIR}/link_caller.ptx
                      ${CMAKE_CURRENT_BINARY_DIR}/link_callee.ptx)
cr_cuda_program(memops)
cr_cuda_test(memops)
