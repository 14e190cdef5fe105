#!/usr/bin/env python3
"""Reads the device through pynvml (NVIDIA's Python binding, which loads
libnvidia-ml.so.1) and prints what it saw as JSON, for nvml_test.py.

  pynvml_client.py              count, memory (v1 and v2), processes, uuid, errors
  pynvml_client.py utilization  {"utilization": percent}
  pynvml_client.py sensors      temperature, power, power limit, SM clock, fan (a number
                                or the error)
"""
import json
import os
import sys

import pynvml as nv


def error(fn, *args):
    got = value(fn, *args)
    return got if isinstance(got, str) else 'no error'


def value(fn, *args):
    try:
        return fn(*args)
    except nv.NVMLError as e:
        return str(e)


def in_forked_child(h):
    """[count, total memory] as a child forked after nvmlInit reads them (the parent's
    handle stays valid there, as with NVIDIA's library), or the error it met."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            got = [nv.nvmlDeviceGetCount(), nv.nvmlDeviceGetMemoryInfo(h).total]
        except nv.NVMLError as e:
            got = str(e)
        os.write(w, json.dumps(got).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = json.loads(f.read() or '"no answer"')
    os.waitpid(pid, 0)
    return got


def main():
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    if sys.argv[1:] == ['sensors']:
        print(json.dumps({
            'temperature': value(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            'power': value(nv.nvmlDeviceGetPowerUsage, h),
            'limit': value(nv.nvmlDeviceGetEnforcedPowerLimit, h),
            'sm_clock': value(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            'fan': value(nv.nvmlDeviceGetFanSpeed, h)}))
        nv.nvmlShutdown()
        return
    if sys.argv[1:] == ['utilization']:
        print(json.dumps({'utilization': nv.nvmlDeviceGetUtilizationRates(h).gpu}))
        nv.nvmlShutdown()
        return
    m = nv.nvmlDeviceGetMemoryInfo(h)
    m2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
    uuid = nv.nvmlDeviceGetUUID(h)
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
    name = nv.nvmlSystemGetProcessName(procs[0].pid) if procs else b''
    seen = {
        'count': nv.nvmlDeviceGetCount(),
        'memory': [m.total, m.used, m.free],
        'memory_v2': [m2.total, m2.used, m2.free],
        'reserved_v2': m2.reserved,
        'processes': [[p.pid, p.usedGpuMemory] for p in procs],
        'graphics': [[p.pid, p.usedGpuMemory]
                     for p in nv.nvmlDeviceGetGraphicsRunningProcesses(h)],
        'uuid': uuid,
        'by_uuid': nv.nvmlDeviceGetHandleByUUID(uuid) is not None,
        'process_name': name.decode() if isinstance(name, bytes) else name,
        'forked': in_forked_child(h),
        'errors': {
            'index_1': error(nv.nvmlDeviceGetHandleByIndex, 1),
            'temperature': error(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            'clock': error(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            'bar1': error(nv.nvmlDeviceGetBAR1MemoryInfo, h),
        },
    }
    nv.nvmlShutdown()
    seen['errors']['after_shutdown'] = error(nv.nvmlDeviceGetCount)
    nv.nvmlInit()
    seen['reinit_count'] = nv.nvmlDeviceGetCount()
    nv.nvmlShutdown()
    print(json.dumps(seen))


if __name__ == '__main__':
    main()
