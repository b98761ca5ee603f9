"""A profile of one step across a cluster's tasks (whitepaper §9.2, the EEG across hosts).

Each task records a span per step it runs (kernels, sends, recvs) on its own process's
``time.perf_counter`` clock.  Before the step the driver estimates each task's clock
offset the NTP way: it asks the task for its clock a few times and, from the exchange with
the shortest round trip, takes the task's reading minus the midpoint of that exchange (the
error is at most half that round trip, well under a millisecond on one machine; on several
machines the clocks need not agree at all).  ``merged_trace`` puts every span on the
driver's clock: one Chrome-trace process per task (named with its pid and node), a
thread track per device, and a flow arrow from each send to the recv with the same
rendezvous key -- within a task, or across tasks.
"""

from __future__ import annotations

import time

from flowjit.runtime.cluster import CALL_TIMEOUT

PINGS = 5


def clock_offsets(cluster, tasks: list[str]) -> dict[str, dict]:
    """task -> {"offset": its clock minus the driver's (s), "error": the bound on that (s)}."""
    actors = cluster.actors()
    offsets = {}
    for task in tasks:
        best = None
        for _ in range(PINGS):
            before = time.perf_counter()
            [theirs] = cluster._get([actors[task].clock.remote()], CALL_TIMEOUT, f"reading the clock of {task}",
                                    [task])
            after = time.perf_counter()
            if best is None or after - before < best[0]:
                best = (after - before, theirs - (before + after) / 2)
        offsets[task] = {"offset": best[1], "error": best[0] / 2}
    return offsets


def merged_trace(cluster, name: str, spans: dict[str, list], offsets: dict[str, dict], origin: float) -> dict:
    """One Chrome trace of every task's ``spans`` (see the module docstring); times in µs
    from ``origin`` (on the driver's clock)."""
    events = []
    tracks: dict[tuple[str, str], tuple[int, int]] = {}          # (task, device) -> (pid, tid)
    for pid, task in enumerate(cluster.tasks, start=1):
        info = cluster.info(task)
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"{task} (pid {info.pid} on {info.node})"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
        for tid, device in enumerate(cluster.devices_of(task)):
            tracks[(task, device.name)] = (pid, tid)
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": f"{device.name.rsplit('/device:', 1)[1]} ({device.name})"}})
    ends: dict[str, dict[str, tuple]] = {}                        # key -> {"send"/"recv": (pid, tid, ts)}
    for task, recorded in spans.items():
        offset = offsets[task]["offset"]
        for device, node, op, kind, key, loc, start, end in recorded:
            pid, tid = tracks[(task, device)]
            ts = (start - offset - origin) * 1e6
            args = {"op": op, "device": device, "task": task}
            if loc:
                args["loc"] = loc
            if key:
                args["key"] = key
            events.append({"ph": "X", "name": node, "cat": kind, "pid": pid, "tid": tid, "ts": ts,
                           "dur": max((end - start) * 1e6, 0.01), "args": args})
            if kind != "kernel":
                ends.setdefault(key, {})[kind] = (pid, tid, ts)
    flows = 0
    for key, pair in ends.items():
        if len(pair) != 2:
            continue
        for phase, kind in (("s", "send"), ("f", "recv")):
            pid, tid, ts = pair[kind]
            events.append({"ph": phase, "id": flows, "name": "send", "cat": "transfer", "pid": pid, "tid": tid,
                           "ts": ts, "args": {"key": key}, **({"bp": "e"} if phase == "f" else {})})
        flows += 1
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"program": name, "tasks": list(spans), "devices": [device for _, device in tracks],
                          "clock_offsets_s": {task: value["offset"] for task, value in offsets.items()},
                          "clock_error_s": {task: value["error"] for task, value in offsets.items()},
                          "transfers": flows}}


def record_cluster_costs(executable, costs) -> None:
    """The kernel times of the last profiled step into ``costs`` (as a local profile does)."""
    from flowjit.runtime.executor_trace import record_kernel_time
    nodes = {(graph.attrs["device"], node.name): node for graph in executable.partitions for node in graph.nodes}
    devices = {device.name: device for device in executable.cluster.device_set}
    for recorded in executable.last_spans.values():
        for device, node, op, kind, key, loc, start, end in recorded:
            if kind == "kernel":
                record_kernel_time(costs, nodes[(device, node)], devices[device], end - start)


def profile_on_cluster(lowered, arrays, costs) -> tuple[list, dict]:
    """``jit(f, devices=cluster).profile(...)``: a warm-up step (registering, compiling), whose
    variable updates are undone, then the profiled step, under the variables' locks as one
    call; its kernel times go into ``costs``.  Returns the outputs and the merged trace."""
    from flowjit.runtime.variables import read_values, write_values
    executable, buffers = lowered.cluster_executable, lowered.variable_buffers

    def warm_then_profile(*arrays):
        saved = read_values(buffers.values())
        executable(*arrays)                                   # registers, compiles, first touch...
        write_values([(buffers[name], value) for name, value in saved.items()])   # ...undone
        return executable.profile(*arrays)
    outputs, trace = lowered.variable_guard.wrap(warm_then_profile)(*arrays)
    record_cluster_costs(executable, costs)
    return outputs, trace
