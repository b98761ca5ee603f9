"""Recovery from a lost task (whitepaper §3.3): what ``flowjit.train.loop`` does when a step on
a cluster fails because a task died, hung or lost its variables.

The lost tasks are restarted (new processes), then every variable of the checkpoint is
restored from the latest checkpoint -- those on the new processes, which held nothing, and
those on the tasks that survived, which may hold half of the failed step's updates.  The
programs register with the new processes on their next step.  A task lost again during the
restore is recovered in turn, within the same budget of recoveries.  A step that failed
because a task *raised* is the program's error, not a lost task: it is not retried.
"""

from __future__ import annotations

import time

from flowjit.runtime.cluster import ClusterError

RECOVERABLE = ("died", "hung", "unavailable", "lost")


def recover_from(error: ClusterError, checkpoint, directory, budget: int):
    """Restart what ``error`` lost and restore ``checkpoint`` from ``directory``'s latest:
    ``(restored, what happened in words)``.  Raises ``error`` when it cannot be recovered
    from (no cluster, no checkpoint, a task that raised, or ``budget`` recoveries spent)."""
    began = time.monotonic()
    restarted: list[str] = []
    while True:
        if error.kind not in RECOVERABLE or error.cluster is None or budget <= 0:
            raise error
        if checkpoint is None or checkpoint.latest(directory) is None:
            raise ClusterError(f"{error} -- and there is no checkpoint to recover from (give train.loop a "
                               f"checkpoint_dir)", task=error.task, kind=error.kind, pid=error.pid,
                               node=error.node, cluster=error.cluster) from error
        budget -= 1
        try:
            restarted += error.cluster.recover(error)
            restored = checkpoint.restore(directory)
        except ClusterError as again:                 # lost again while recovering
            error = again
            continue
        what = (f"{error.kind} on {error.task or 'a task'}: restarted {', '.join(restarted) or 'nothing'}, restored "
                f"step {restored.step} in {time.monotonic() - began:.2f} s")
        return restored, what
