"""Variables and threads: a call holds its variables' locks for the whole call, so concurrent
calls lose no update, never see a torn value, share read-only variables and cannot deadlock;
a wait past its deadline fails naming the variable; a checkpoint is one snapshot."""

from __future__ import annotations

import numpy as np
import pytest

import flowjit
from flowjit.runtime.checkpoint import read_checkpoint

from variable_helpers import MODES


# -- threads: a call holds its variables' locks for the whole call ---------------------------------
JOIN_S = 60          # every join has a deadline: a deadlock fails the test instead of hanging it


def run_threads(*targets):
    """Run each target in its own thread, which take turns often (races show up); errors raised
    there are raised here."""
    import sys
    errors = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        _run_threads(targets, errors)
    finally:
        sys.setswitchinterval(interval)
    if errors:
        raise errors[0]


def _run_threads(targets, errors):
    import threading

    def wrapped(target):
        try:
            target()
        except BaseException as error:          # noqa: B036  (re-raised below)
            errors.append(error)
    threads = [threading.Thread(target=wrapped, args=(target,), daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_S)
    assert not any(thread.is_alive() for thread in threads), f"threads still running after {JOIN_S} s: deadlock"


@pytest.mark.parametrize("mode", MODES)
def test_two_threads_calling_one_function_lose_no_update(mode):
    """Each call computes the new count, then a matmul (BLAS lets other threads run), then stores
    it: without a lock per call, two calls read the same count and one update is lost."""
    counter = flowjit.Variable(np.int64(0), name="threaded_counter")

    @flowjit.jit(**MODES[mode])
    def step(a):
        new = counter + 1
        product = a @ a                       # between the read and the write
        counter.assign(new)
        return new, product.sum()

    a = np.linspace(0, 1, 120 * 120).reshape(120, 120)
    step(a)
    seen = [[], []]

    def calls(index):
        def run():
            for _ in range(40):
                seen[index].append(int(step(a)[0]))
        return run

    run_threads(calls(0), calls(1))
    assert counter.numpy() == 81
    assert sorted(seen[0] + seen[1]) == list(range(2, 82))      # every call saw the one before it


@pytest.mark.parametrize("mode", ["fused", "two devices"])
def test_two_functions_using_variables_in_opposite_orders_neither_deadlock_nor_lose_updates(mode):
    a = flowjit.Variable(np.zeros(3), name="order_a")
    b = flowjit.Variable(np.zeros(3), name="order_b")
    m = np.linspace(0, 1, 100 * 100).reshape(100, 100)

    def in_order(first, second):
        @flowjit.jit(**MODES[mode])
        def step(m):
            new_first = first + 1
            new_second = second + (m @ m).sum() * 0 + 1
            first.assign(new_first)
            second.assign(new_second)
            return new_first, new_second
        return step
    a_then_b, b_then_a = in_order(a, b), in_order(b, a)

    def calls(function):
        def run():
            for _ in range(30):
                function(m)
        return run

    run_threads(calls(a_then_b), calls(b_then_a))
    np.testing.assert_array_equal(a.numpy(), np.full(3, 60.0))
    np.testing.assert_array_equal(b.numpy(), np.full(3, 60.0))


@pytest.mark.parametrize("mode", ["fused", "unfused", "two devices"])
def test_a_reader_never_sees_a_torn_value(mode):
    """A writer stores arrays whose elements are all equal; copies of 1M elements let other
    threads run mid-copy, so without the lock a reader sees half old, half new."""
    size = 1 << 20
    v = flowjit.Variable(np.zeros(size), name="torn")

    @flowjit.jit(**MODES[mode])
    def store(x):
        v.assign(x)
        return x[:1]

    @flowjit.jit(**MODES[mode])
    def load():
        return v.value()

    torn = []

    def writer():
        for i in range(1, 25):
            store(np.full(size, float(i)))

    def reader():
        for _ in range(25):
            value = load()
            if value.min() != value.max():
                torn.append((value.min(), value.max()))

    run_threads(writer, reader)
    assert not torn


def test_calls_that_only_read_share_a_variable_and_a_writer_waits_for_them():
    from flowjit.runtime.variables import locked
    v = flowjit.Variable(np.arange(4.0), name="shared_read")

    @flowjit.jit
    def read(x):
        return v * x

    @flowjit.jit
    def write(x):
        v.assign(x)
        return x

    x = np.ones(4)
    read(x), write(v.numpy())                      # compiled before the locks are held
    import threading
    with locked(v._buffer, False, "the test"):      # a read-only call of its own, held open
        run_threads(lambda: read(x))                # another reader goes ahead
        writer = threading.Thread(target=write, args=(np.full(4, 7.0),), daemon=True)
        writer.start()
        writer.join(0.3)
        assert writer.is_alive()                    # the writer waits for the readers...
        np.testing.assert_array_equal(v._buffer.value, np.arange(4.0))
    writer.join(JOIN_S)
    assert not writer.is_alive()                    # ...and runs once they are done
    np.testing.assert_array_equal(v.numpy(), np.full(4, 7.0))


def test_a_call_that_waits_too_long_fails_naming_the_variable_and_runs_nothing():
    from flowjit.runtime.variables import VariableLockTimeout, locked
    v = flowjit.Variable(np.zeros(2), name="busy")

    @flowjit.jit(variable_timeout_s=0.2)
    def bump():
        v.assign_add(1.0)
        return v.value()

    bump()
    with locked(v._buffer, True, "a test holding it"):
        with pytest.raises(VariableLockTimeout, match=r"a call of @bump waited 0.2 s to write variable 'busy', "
                                                      r"held for writing by a test holding it on thread"):
            bump()
    np.testing.assert_array_equal(v.numpy(), [1.0, 1.0])           # the failed call ran nothing
    np.testing.assert_array_equal(bump(), [2.0, 2.0])              # and released what it had taken


def test_updates_outside_jitted_functions_are_atomic_across_threads():
    """``v.assign_add`` on 1M elements lets other threads run between its read and its write."""
    size = 1 << 20
    a = flowjit.Variable(np.zeros(size), name="eager_a")
    b = flowjit.Variable(np.zeros(size), name="eager_b")

    def adds(target, source):
        def run():
            for _ in range(15):
                target.assign_add(1.0)
                target.assign_add(source * 0)            # reads the other variable: no deadlock
        return run

    run_threads(adds(a, b), adds(a, b), adds(b, a))
    assert a.numpy().min() == a.numpy().max() == 30.0
    assert b.numpy().min() == b.numpy().max() == 15.0


def test_a_checkpoint_saved_while_another_thread_trains_holds_one_step(tmp_path):
    """Each step adds 1 to every variable; a save copies them under their locks, all held at
    once, so every checkpoint holds one step's values (copying one variable after another
    would let steps run in between)."""
    variables = [flowjit.Variable(np.zeros(1 << 16, np.float32), name=f"snap_{index}") for index in range(16)]

    @flowjit.jit
    def step():
        for variable in variables:
            variable.assign_add(np.float32(1))
        return variables[0][:1]

    step()
    checkpoint = flowjit.Checkpoint(variables, keep=None)
    saved = []

    def train():
        for _ in range(300):
            step()

    def save():
        for index in range(10):
            saved.append(checkpoint.save(tmp_path, index))

    run_threads(train, save)
    for path in saved:
        values = np.stack(list(read_checkpoint(path).values()))
        assert values.min() == values.max(), (path, np.unique(values))
    checkpoint.restore(saved[0])
    first = read_checkpoint(saved[0])[variables[0].name][0]
    assert all(variable.numpy().max() == variable.numpy().min() == first for variable in variables)
