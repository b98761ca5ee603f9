"""A cluster task's bookkeeping of runs, tensors and aborts (runtime/cluster_task.py), without
Ray: threads of the driver may run steps of one program at once, so a task may see step 8's
run before step 7's, and step 7's tensors before either.  What it keeps and drops is decided
by each run's horizon (the lowest step the driver still had in flight): a step's tensors and
its abort are kept until it begins, unless it is below the horizon or over here; what is kept
for steps below the horizon is purged, so nothing accumulates.

The task is the real one, built with a stand-in for ``ray`` (its constructor asks Ray only for
the node's address) and given a stand-in program whose calls record what they get."""

import sys
import types

import numpy as np
import pytest

from flowjit.runtime.cluster_task import StepAborted, Task

PROGRAM = "p-0"


class _Call:
    """A step's call: the mailbox it began with, the tensors delivered to it, its failure."""

    def __init__(self, step: int, mailbox: dict):
        self.step, self.mailbox, self.error, self.profile = step, dict(mailbox), None, False

    def deliver(self, key, tensor):
        self.mailbox[key] = tensor

    def fail(self, step, error):
        self.error = error

    def wait(self, timeout):
        if self.error is not None:
            raise self.error
        return []


class _Program:
    """What ``Task.run`` begins and launches: each step's call, kept by step."""

    def __init__(self):
        self.calls: dict[int, _Call] = {}

    def begin(self, arrays, *, mailbox, tag, profile, launch, on_done):
        call = self.calls[tag] = _Call(tag, mailbox)
        return call

    def launch(self, call):
        pass


class _Link:
    def __init__(self):
        self.sent = []

    def send(self, message, timeout=None):
        self.sent.append(message)


@pytest.fixture
def task(monkeypatch):
    fake_ray = types.SimpleNamespace(util=types.SimpleNamespace(get_node_ip_address=lambda: "127.0.0.1"))
    monkeypatch.setitem(sys.modules, "ray", fake_ray)
    task = Task("/job:worker/task:0", [], [], b"k" * 32)
    task.programs[PROGRAM] = _Program()
    task.link = _Link()
    yield task
    task.listener.close()


def _run(task, step, horizon):
    task.run(task.link, PROGRAM, step, horizon, 0, None, {})
    return task.programs[PROGRAM].calls[step]


def _end(task, step):
    """The step's call finished here (as the executor's ``on_done`` says)."""
    task.finished(task.link, PROGRAM, step, task.programs[PROGRAM].calls[step])


def _held(task):
    stats = task.stats()
    return stats["early"], stats["aborted"], stats["begun"]


def test_a_step_whose_run_comes_after_a_later_steps_gets_every_tensor_sent_to_it(task):
    before = np.arange(3.0)
    task.deliver(PROGRAM, 7, "a", before)                # before any run: kept
    later = _run(task, 8, horizon=7)                     # step 7 is still in flight in the driver
    task.deliver(PROGRAM, 7, "b", np.ones(2))            # after step 8 began: still kept
    task.deliver(PROGRAM, 8, "c", np.zeros(1))
    call = _run(task, 7, horizon=7)
    assert set(call.mailbox) == {"a", "b"} and call.mailbox["a"] is before and call.error is None
    assert set(later.mailbox) == {"c"} and later.error is None
    assert _held(task)[0] == 0


def test_an_abort_that_comes_after_a_later_steps_run_fails_the_step_when_it_begins(task):
    _run(task, 8, horizon=7)
    task.abort(PROGRAM, 7, "task 1 died")
    call = _run(task, 7, horizon=7)
    assert isinstance(call.error, StepAborted) and "task 1 died" in str(call.error)
    assert task.programs[PROGRAM].calls[8].error is None


def test_what_comes_for_steps_below_the_horizon_is_dropped_and_what_was_kept_is_purged(task):
    task.deliver(PROGRAM, 3, "a", np.ones(1))            # steps 3 and 4 never begin here (aborted)
    task.abort(PROGRAM, 4, "aborted")
    task.deliver(PROGRAM, 5, "a", np.ones(1))
    assert _held(task)[:2] == (2, 1)
    _run(task, 6, horizon=5)                             # the driver is done with every step below 5
    assert _held(task)[:2] == (1, 0)                     # step 5's tensor is kept, the rest purged
    task.deliver(PROGRAM, 4, "b", np.ones(1))            # late, for a step the driver is done with
    task.abort(PROGRAM, 3, "late")
    assert _held(task)[:2] == (1, 0)
    assert set(_run(task, 5, horizon=5).mailbox) == {"a"}
    assert _held(task)[:2] == (0, 0)


def test_what_comes_for_a_step_over_here_is_dropped_and_the_steps_begun_stay_few(task):
    for step in range(20):
        _run(task, step, horizon=step)
        _end(task, step)
        task.deliver(PROGRAM, step, "late", np.ones(1))  # (the step failed elsewhere: a sender ran late)
        task.abort(PROGRAM, step, "aborted after it ended here")
        assert _held(task) == (0, 0, 1)
    assert [message[0] for message in task.link.sent] == ["done"] * 20
    task.forget(PROGRAM)
    assert _held(task) == (0, 0, 0) and PROGRAM not in task.horizon


def test_a_run_read_after_the_driver_was_done_with_its_step_fails_at_once(task):
    _run(task, 9, horizon=9)                             # (step 8's run on a link that closed, read late)
    call = _run(task, 8, horizon=8)
    assert isinstance(call.error, StepAborted) and "after the driver was done with it" in str(call.error)
    assert task.horizon[PROGRAM] == 9
