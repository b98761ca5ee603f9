"""A GPU device's stream as the multi-device executor sees it (issue 15: Send/Recv between
``cpu:*`` and ``gpu:*`` as asynchronous copies on CUDA streams).

Each GPU that runs kernels (CuPy sees it, not numba's simulator) gets one ``CudaQueue`` per
process: a non-blocking CUDA stream on which its device's worker thread issues every kernel
without waiting for it, and on which the copies into and out of it are issued.  Values
between the GPU's own kernels stay in its memory.  What crosses devices is copied at the
send:

- gpu -> cpu: an asynchronous copy into pinned host memory and an event recorded after it:
  a ``Pending``.  The host side waits on that event (``settled``) when a kernel of its own,
  a send or the caller first needs the array -- never on the whole device.
- cpu -> gpu: a copy issued on the GPU's stream, so that its kernels, issued later on the
  same stream, run after it.
- gpu -> gpu: the receiving stream waits on an event recorded on the sending one (the
  recv waits on an event, not on the host), then copies peer to peer.

The executor synchronises the streams a call used before it returns (so pinned buffers
and events are done with, and device results are ready on any stream), and a profile's
GPU spans are the device's own times, read from events (``mark``/``elapsed``).

A call's device inputs may still be being written by the caller's own kernels: each queue
waits on an event of the caller's stream first (``follow``).

The interface (``enter``, ``holds``, ``follow``, ``mark``, ``elapsed``, ``to_host``,
``to_device``, ``from_peer``, ``synchronize``) is what the executor calls; the executor's
tests drive it with a queue whose copies land only when waited on.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from flowjit.gpu import device_array, is_device_array, order_after

_DEVICE_TO_HOST = 2            # cudaMemcpyDeviceToHost


class Pending:
    """A host array that an asynchronous copy is still writing: ``wait()`` returns it once
    the event recorded after the copy has happened (and lets go of the device array)."""

    __slots__ = ("host", "event", "source")

    def __init__(self, host: np.ndarray, event, source=None):
        self.host, self.event, self.source = host, event, source

    def wait(self) -> np.ndarray:
        if self.event is not None:
            self.event.synchronize()
            self.event = self.source = None
        return self.host


def settled(value):
    """``value``, or the host array a ``Pending`` stands for, once its copy is done."""
    return value.wait() if type(value) is Pending else value


class CudaQueue:
    """GPU ``index``'s stream in this process (CuPy's), and the copies in and out of it."""

    def __init__(self, index: int):
        import cupy
        import cupyx
        self.cupy, self.empty_pinned, self.index = cupy, cupyx.empty_pinned, index
        self.device = cupy.cuda.Device(index)
        with self.device:
            self.stream = cupy.cuda.Stream(non_blocking=True)

    def enter(self) -> None:
        """Make this GPU and its stream current in the calling thread (the device's worker)."""
        self.device.use()
        self.stream.use()

    @contextlib.contextmanager
    def current(self):
        """This GPU and its stream current in the calling thread for a while, then whatever
        stream was current before.  (Not ``with stream:``: leaving it makes the device's null
        stream current, whatever ``use()`` had set -- a worker's later kernels would go there.)"""
        with self.device:
            previous = self.cupy.cuda.get_current_stream()
            self.stream.use()
            try:
                yield
            finally:
                previous.use()

    def holds(self, array) -> bool:
        """Whether ``array`` (a device array) is in this GPU's memory."""
        return device_array(array).data.device_id == self.index

    def follow(self, arrays) -> None:
        """Order this stream after what the calling thread has issued so far on the current
        stream of each GPU that holds one of ``arrays`` (a call's device inputs, which the
        caller's kernels may still be writing there): an event there, waited on here."""
        for index in sorted({device_array(array).data.device_id for array in arrays if is_device_array(array)}):
            order_after(index, self.stream)

    def mark(self, block: bool = False):
        """An event recorded now on the stream (created on its device, as CUDA requires);
        ``block``: waiting on it sleeps instead of spinning."""
        with self.device:
            event = self.cupy.cuda.Event(block=block)
            event.record(self.stream)
        return event

    def elapsed(self, start, end) -> float:
        """Seconds between two events of ``mark`` (both done)."""
        return self.cupy.cuda.get_elapsed_time(start, end) / 1e3

    def to_host(self, value):
        """A ``Pending`` of ``value``'s copy into pinned host memory (a host array: itself)."""
        if not is_device_array(value):
            return value
        with self.current():
            array = self.cupy.ascontiguousarray(device_array(value))
            host = self.empty_pinned(array.shape, array.dtype)
            if array.nbytes:
                self.cupy.cuda.runtime.memcpyAsync(host.ctypes.data, array.data.ptr, array.nbytes,
                                                   _DEVICE_TO_HOST, self.stream.ptr)
            return Pending(host, self.mark(block=True), array)

    def to_device(self, value):
        """``value`` (a host array) copied to this GPU on its stream; its kernels issued
        after it see the copy."""
        with self.current():
            return self.cupy.asarray(value)

    def from_peer(self, value, source: "CudaQueue", keep: list):
        """``value``, on ``source``'s GPU, copied here: this stream waits on an event of the
        source's (recorded after the value's kernel), then copies peer to peer.  What the
        copy reads is appended to ``keep``, which the caller holds until the streams are
        synchronised (a buffer freed earlier could be reused by the source's next kernel)."""
        with source.current():
            array = self.cupy.ascontiguousarray(device_array(value))
            ready = source.mark()
        keep.append(array)
        with self.current():
            self.stream.wait_event(ready)
            out = self.cupy.empty(array.shape, array.dtype)
            if array.nbytes:
                self.cupy.cuda.runtime.memcpyPeerAsync(out.data.ptr, self.index, array.data.ptr, source.index,
                                                       array.nbytes, self.stream.ptr)
        return out

    def synchronize(self) -> None:
        self.stream.synchronize()


_QUEUES: dict[int, CudaQueue] = {}
_LOCK = threading.Lock()


def cuda_queue(index: int) -> CudaQueue:
    """The process's queue for GPU ``index`` (one stream per GPU, shared by every program)."""
    with _LOCK:
        queue = _QUEUES.get(index)
        if queue is None:
            queue = _QUEUES[index] = CudaQueue(index)
        return queue


def queues_for(devices) -> dict[str, CudaQueue]:
    """Device name -> queue of each GPU among ``devices`` that runs kernels here.  None under
    numba's simulator, whose kernels take and give host arrays."""
    from flowjit.gpu import simulated
    gpus = [device for device in devices if device.type == "gpu" and device.executable]
    if not gpus or simulated():
        return {}
    return {device.name: cuda_queue(device.spec.index or 0) for device in gpus}
