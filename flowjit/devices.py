"""Device names, partial device specs, and the set of devices a program may use.

Names follow the whitepaper: ``/job:<job>/task:<n>/device:<type>:<i>``.  Short forms
expand against the local job: ``cpu:1`` and ``/device:cpu:1`` are
``/job:localhost/task:0/device:cpu:1``.  A spec with parts missing or ``*`` in them
(``/device:gpu:*``, ``/job:worker``, ``gpu``) is a constraint that several devices meet.

A ``DeviceSet`` lists the devices placement may choose from.  Local CPU devices run
here, each on its own threads with its own thread budget.  A set may also describe
devices that cannot run here (a GPU with its memory bandwidth, flop rate and link
speed), so that placement can be planned and inspected for a machine you do not have.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace

from flowjit.errors import FlowjitError

LOCAL_JOB = "localhost"
_PART = re.compile(r"^(job|task|device|replica):(.+)$")


class DeviceError(FlowjitError):
    """A malformed device name, or a device that is not in the device set."""


@dataclass(frozen=True)
class DeviceSpec:
    """A full or partial device name; ``None`` fields match anything."""

    job: str | None = None
    task: int | None = None
    type: str | None = None
    index: int | None = None

    @classmethod
    def parse(cls, text: str) -> "DeviceSpec":
        """``/job:j/task:n/device:type:i``, any part omitted or ``*``; or ``type:i``, ``type``."""
        original = text
        text = text.strip()
        if not text:
            return cls()
        job = task = kind = index = None
        parts = [part for part in text.split("/") if part] if text.startswith("/") else [f"device:{text}"]
        for part in parts:
            match = _PART.match(part)
            if match is None and part.split(":")[0].lower() in ("cpu", "gpu"):
                # "/cpu:0" (TensorFlow's legacy short form) is a device part.
                match = _PART.match(f"device:{part}")
            key, value = match.groups() if match else (None, None)
            if key == "job":
                job = None if value == "*" else value
            elif key == "task" or key == "replica":
                if key == "task":
                    task = _index(value, original)
            elif key == "device":
                pieces = value.split(":")
                if len(pieces) > 2 or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|\*", pieces[0]):
                    raise DeviceError(f"malformed device name '{original}' (expected "
                                      f"/job:<job>/task:<n>/device:<type>:<i>, or cpu:1)")
                kind = None if pieces[0] == "*" else pieces[0].lower()
                index = _index(pieces[1], original) if len(pieces) == 2 else None
            else:
                raise DeviceError(f"malformed device name '{original}': cannot read '{part}' (expected "
                                  f"/job:<job>/task:<n>/device:<type>:<i>, or cpu:1)")
        return cls(job, task, kind, index)

    def merged(self, inner: "DeviceSpec") -> "DeviceSpec":
        """A nested ``flowjit.device`` scope: the inner spec's fields win where it sets them."""
        return DeviceSpec(inner.job if inner.job is not None else self.job,
                          inner.task if inner.task is not None else self.task,
                          inner.type if inner.type is not None else self.type,
                          inner.index if inner.index is not None else self.index)

    def matches(self, device: "DeviceSpec") -> bool:
        return all(mine is None or mine == theirs for mine, theirs in
                   ((self.job, device.job), (self.task, device.task), (self.type, device.type),
                    (self.index, device.index)))

    def __str__(self) -> str:
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.type is not None or self.index is not None:
            parts.append(f"/device:{self.type or '*'}:{'*' if self.index is None else self.index}")
        return "".join(parts) or "/"

    @property
    def short(self) -> str:
        """``cpu:1`` for a device of the local job, the full name otherwise."""
        if self.job == LOCAL_JOB and self.task == 0 and self.type is not None and self.index is not None:
            return f"{self.type}:{self.index}"
        return str(self)


def _index(text: str, original: str) -> int | None:
    if text == "*":
        return None
    if not text.isdigit():
        raise DeviceError(f"malformed device name '{original}': '{text}' is not an index or *")
    return int(text)


def canonical(text: str) -> str:
    """The full name of a device given in any form (short forms expand to the local job)."""
    spec = DeviceSpec.parse(text)
    if spec.type is None or spec.index is None:
        raise DeviceError(f"'{text}' names no single device (give a type and an index, e.g. cpu:1)")
    return str(DeviceSpec(spec.job or LOCAL_JOB, 0 if spec.task is None else spec.task, spec.type, spec.index))


# Cost figures per device type: memory bandwidth (bytes/s), arithmetic rate (flop/s), a
# kernel's fixed cost (s), and the link to other devices (bytes/s, s).  A CPU device's
# bandwidth, flops and launch are None unless given: this machine's, measured once
# (flowjit.machine); STATIC_CPU (machine.STATIC) stands in where no measurement is
# wanted.
DEFAULTS = {
    "cpu": dict(bandwidth=None, flops=None, launch=None, link_bandwidth=10e9, link_latency=5e-6),
    "gpu": dict(bandwidth=2000e9, flops=50e12, launch=8e-6, link_bandwidth=25e9, link_latency=10e-6),
}
STATIC_CPU = dict(bandwidth=20e9, flops=50e9, launch=2e-6)


def _gpu_runs_here(index: int) -> bool:
    """Whether ``gpu:index`` can run kernels here: numba-cuda is installed and CuPy sees that
    many GPUs, or numba-cuda simulates them (``NUMBA_ENABLE_CUDASIM=1``: every ``gpu:N`` is
    its one simulated GPU)."""
    import flowjit.gpu as gpu
    return gpu.available() and (gpu.simulated() or index < gpu.device_count())


def local_gpu_figures(spec: "DeviceSpec"):
    """``gpu_figures.GpuFigures`` of the real GPU a device of this process names (None: a
    simulated GPU, another task's, or none here)."""
    if spec.type != "gpu" or spec.job not in (None, "localhost") or spec.task not in (None, 0):
        return None
    from flowjit.config import cache_directory
    from flowjit.gpu_figures import gpu_figures
    return gpu_figures(spec.index or 0, cache_directory("default"))


def _runs_here(device) -> str:
    """The table's last column: yes, no, or simulated (a GPU on numba's CUDA simulator)."""
    if not device.executable:
        return "no"
    if device.type == "gpu":
        import flowjit.gpu as gpu
        if gpu.simulated():
            return "simulated"
    return "yes"


@dataclass(frozen=True)
class Device:
    """One device: its full name, and what the cost model and the executor need to know."""

    name: str
    threads: int = 1
    bandwidth: float | None = None        # None: this machine's measured figure (CPU devices)
    flops: float | None = None
    launch: float | None = None
    link_bandwidth: float = 10e9          # to the other devices of its process
    link_latency: float = 5e-6
    executable: bool = True
    remote_bandwidth: float | None = None  # to devices of other processes (a cluster's tasks; None: link_*)
    remote_latency: float | None = None
    node: str | None = None               # the machine its process runs on (a cluster's tasks; None: unknown)
    node_link: tuple[float, float] | None = None   # (latency, bandwidth) to other processes of its node

    @property
    def spec(self) -> DeviceSpec:
        return DeviceSpec.parse(self.name)

    @property
    def remote_link(self) -> tuple[float, float]:
        """(latency, bandwidth) of its link to devices of other processes."""
        return (self.link_latency if self.remote_latency is None else self.remote_latency,
                self.link_bandwidth if self.remote_bandwidth is None else self.remote_bandwidth)

    def link_to(self, other: "Device") -> tuple[float, float]:
        """(latency, bandwidth) from this device to a device of another process: the link of
        their node where both are known to share one, else the slower of their remote links."""
        if self.node is not None and self.node == other.node and self.node_link and other.node_link:
            (out_latency, out_bandwidth), (in_latency, in_bandwidth) = self.node_link, other.node_link
        else:
            (out_latency, out_bandwidth), (in_latency, in_bandwidth) = self.remote_link, other.remote_link
        return max(out_latency, in_latency), min(out_bandwidth, in_bandwidth)

    @property
    def type(self) -> str:
        return self.spec.type

    @property
    def short(self) -> str:
        return self.spec.short

    def figures(self, machine=None) -> dict:
        """bandwidth, flops and launch: the device's own, else ``machine``'s (measured), else
        the static stand-ins."""
        fallback = machine.__dict__ if machine is not None else STATIC_CPU
        return {key: getattr(self, key) if getattr(self, key) is not None else fallback[key]
                for key in ("bandwidth", "flops", "launch")}

    @classmethod
    def make(cls, name: str, **fields) -> "Device":
        full = canonical(name)
        spec = DeviceSpec.parse(full)
        kind = spec.type
        values = dict(DEFAULTS.get(kind, DEFAULTS["cpu"]))
        if "executable" not in fields:            # (a task's GPU: its process says whether it runs)
            values["executable"] = kind == "cpu" or (kind == "gpu" and _gpu_runs_here(spec.index or 0))
        if fields.get("executable", values.get("executable")) and kind == "gpu" and "bandwidth" not in fields:
            figures = local_gpu_figures(spec)
            if figures is not None:                 # (a real GPU: its figures, measured once)
                values.update(bandwidth=figures.bandwidth, flops=figures.flops, launch=figures.launch)
        values.update(fields)
        return cls(full, **values)


@dataclass(frozen=True)
class DeviceSet:
    """The devices a program may be placed on, in preference order (ties go to the first)."""

    devices: tuple[Device, ...] = field(default_factory=tuple)
    cluster: object = None          # the flowjit.Cluster whose tasks own these devices (None: this process)

    @classmethod
    def of(cls, devices) -> "DeviceSet":
        """From names (``"cpu:1"``), ``Device`` objects, dicts of ``Device`` fields with a
        ``name``, or a ``flowjit.Cluster`` (its tasks' devices)."""
        if isinstance(devices, DeviceSet):
            return devices
        if isinstance(getattr(devices, "device_set", None), DeviceSet):
            return devices.device_set
        if isinstance(devices, (str, Device, dict)):
            devices = [devices]
        made = []
        for item in devices:
            if isinstance(item, Device):
                made.append(replace(item, name=canonical(item.name)))
            elif isinstance(item, dict):
                fields = dict(item)
                made.append(Device.make(fields.pop("name"), **fields))
            else:
                made.append(Device.make(str(item)))
        names = [device.name for device in made]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise DeviceError(f"device set names {', '.join(duplicates)} more than once")
        if not made:
            raise DeviceError("a device set needs at least one device")
        return cls(tuple(made))

    @classmethod
    def parse(cls, text: str) -> "DeviceSet":
        """``cpu:0,cpu:1,gpu:0`` (the CLI's --devices); ``cpu:1x2`` gives cpu:1 two threads."""
        items = []
        for part in filter(None, (piece.strip() for piece in text.split(","))):
            name, _, threads = part.partition("x")
            if threads and not threads.isdigit():
                raise DeviceError(f"'{part}': the thread count after 'x' must be a number")
            items.append({"name": name, "threads": int(threads)} if threads else name)
        return cls.of(items)

    def __iter__(self):
        return iter(self.devices)

    def __len__(self) -> int:
        return len(self.devices)

    def __getitem__(self, name: str) -> Device:
        full = canonical(name)
        for device in self.devices:
            if device.name == full:
                return device
        raise DeviceError(f"no device {name} in the device set ({', '.join(d.short for d in self.devices)})")

    def matching(self, spec: DeviceSpec) -> list[Device]:
        return [device for device in self.devices if spec.matches(device.spec)]

    def describe(self, machine=None) -> str:
        """One line per device: the table ``flowjit devices`` prints.  A CPU device's unset
        figures are ``machine``'s (a ``MachineFigures``), marked ``*``; without one, the static
        stand-ins."""
        lines = [f"{'device':<36}{'short':<8}{'threads':>8}{'GB/s':>9}{'GFLOP/s':>10}{'launch µs':>11}"
                 f"{'link GB/s':>11}  runs here"]
        for device in self.devices:
            figures = device.figures(machine)
            mark = "*" if machine is not None and device.bandwidth is None else " "
            short = device.short if device.short != device.name else "-"      # (a device of another task)
            lines.append(f"{device.name:<36}{short:<8}{device.threads:>8}{figures['bandwidth'] / 1e9:>8.1f}"
                         f"{mark}{figures['flops'] / 1e9:>9.1f}{mark}{figures['launch'] * 1e6:>10.2f}{mark}"
                         f"{device.remote_link[1] / 1e9:>11.0f}  {_runs_here(device)}")
        return "\n".join(lines)


_default: DeviceSet | None = None


def set_devices(devices) -> DeviceSet:
    """Set the session-wide device set (``None``: back to the default, ``cpu:0`` alone)."""
    global _default
    _default = None if devices is None else DeviceSet.of(devices)
    return current_devices()


def current_devices() -> DeviceSet:
    """The session-wide device set: what ``set_devices`` gave, else one CPU with every core."""
    return _default or DeviceSet.of([Device.make("cpu:0", threads=os.cpu_count() or 1)])
