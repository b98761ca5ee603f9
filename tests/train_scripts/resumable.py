"""A training run for the kill-and-restart tests: ``resumable.py CHECKPOINT_DIR OUT.npz SECONDS_PER_STEP``.

Adam on a small regression; batches drawn by position; a checkpoint every 4 steps."""

import sys
import time

import numpy as np

import flowjit
from flowjit import optim, train

checkpoint_dir, out, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
rng = np.random.default_rng(0)
x, y = rng.standard_normal((64, 6)), rng.standard_normal((64, 3))
params = {"w": flowjit.Variable(rng.standard_normal((6, 3)) * 0.1, name="w"),
          "b": flowjit.Variable(np.zeros(3), name="b")}
optimizer = optim.Adam(0.01)


def loss(params, x, y):
    return np.mean((np.tanh(x @ params["w"] + params["b"]) - y) ** 2)


@flowjit.jit
def step(x, y):
    return optimizer.minimize(loss, params, x, y)


def batch(position):
    time.sleep(pause)
    rows = np.random.default_rng(position).integers(0, 64, 16)
    return x[rows], y[rows]


result = train.loop(step, batch, steps=40, checkpoint_dir=checkpoint_dir, every_steps=4)
np.savez(out, w=params["w"].numpy(), b=params["b"].numpy(), start=result.start_step, step=result.step,
         count=optimizer.step_count.numpy(), losses=np.array(result.losses))
