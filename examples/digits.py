"""The whitepaper's Figure 1 model, trained: ReLU(W x + b) layers and a softmax cross-entropy
loss, on the handwritten digits scikit-learn ships (``sklearn.datasets.load_digits``: 1797
8x8 images, offline), with SGD, checkpointed by ``flowjit.train.loop``.

    python examples/digits.py                              # 64 -> 128 -> 10, 2000 steps
    python examples/digits.py --checkpoint-dir /tmp/digits # kill it and run again: it resumes
    python examples/digits.py --devices cpu:0,cpu:1        # one layer per device

The whole training step (forward, backward, the SGD update of every variable) is one
compiled program; the optimiser writes the variables in place.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import flowjit
from flowjit import optim, train


def load(test_fraction: float = 0.2, seed: int = 0):
    """The digits as float32 in [0, 1], split into train and test sets (a fixed shuffle)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(len(labels) * (1 - test_fraction))
    train_rows, test_rows = order[:cut], order[cut:]
    return (images[train_rows], labels[train_rows]), (images[test_rows], labels[test_rows])


def log_softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def forward(layers, x, devices=None):
    """ReLU(x W + b) for each hidden layer, then x W + b: the logits.  With ``devices``, layer i
    runs on ``devices[i % len(devices)]`` (model parallelism: activations cross as Send/Recv)."""
    for index, (w, b) in enumerate(layers):
        with flowjit.device(devices[index % len(devices)] if devices else None):
            x = x @ w + b
            if index < len(layers) - 1:
                x = np.maximum(x, 0)
    return x


def cross_entropy(layers, x, onehot, devices=None):
    """The mean softmax cross-entropy of the logits against one-hot labels."""
    return -np.mean(np.sum(onehot * log_softmax(forward(layers, x, devices)), axis=1))


class Model:
    """The variables (Glorot-uniform weights, zero biases), the optimiser and the compiled step."""

    def __init__(self, sizes=(64, 128, 10), lr: float = 0.1, momentum: float = 0.9, seed: int = 0,
                 devices=None, name: str = "digits"):
        rng = np.random.default_rng(seed)
        self.devices = list(devices) if devices else None
        self.layers = []
        for index, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            device = self.devices[index % len(self.devices)] if self.devices else None
            w = flowjit.Variable(rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32),
                                 name=f"{name}/w{index}", device=device)
            b = flowjit.Variable(np.zeros(fan_out, np.float32), name=f"{name}/b{index}", device=device)
            self.layers.append((w, b))
        self.optimizer = optim.SGD(lr, momentum=momentum, name=f"{name}/sgd")
        options = {"devices": self.devices} if self.devices else {}
        self.step = flowjit.jit(self._step, **options)
        self.predict = flowjit.jit(lambda x: forward(self.layers, x, self.devices).argmax(axis=1), **options)

    def _step(self, x, onehot):
        return self.optimizer.minimize(cross_entropy, self.layers, x, onehot, devices=self.devices)

    def accuracy(self, images, labels) -> float:
        return float(np.mean(self.predict(images) == labels))


def batches(images, labels, batch_size: int, seed: int = 0):
    """Batch ``i`` as a function of ``i`` alone (a fresh shuffle each epoch), so that a restarted
    run sees the batches an uninterrupted one would."""
    per_epoch = len(labels) // batch_size
    onehot = np.eye(10, dtype=np.float32)[labels]

    def batch(position: int):
        epoch, index = divmod(position, per_epoch)
        order = np.random.default_rng([seed, epoch]).permutation(len(labels))
        rows = order[index * batch_size:(index + 1) * batch_size]
        return images[rows], onehot[rows]
    return batch


def run(steps: int = 2000, hidden=(128,), batch_size: int = 64, lr: float = 0.1, momentum: float = 0.9,
        checkpoint_dir=None, every_steps: int | None = None, every_seconds: float | None = None, devices=None,
        seconds_per_step: float = 0.0, progress=None, name: str = "digits") -> dict:
    """Train and return the test accuracy, the last loss and where the run started."""
    (train_x, train_y), (test_x, test_y) = load()
    model = Model((64, *hidden, 10), lr, momentum, devices=devices, name=name)
    data = batches(train_x, train_y, batch_size)
    if seconds_per_step:                                  # slowed down, to kill it mid-way in a test
        fast = data

        def data(position):
            time.sleep(seconds_per_step)
            return fast(position)
    if checkpoint_dir is not None and every_steps is None and every_seconds is None:
        every_steps = max(steps // 10, 1)
    result = train.loop(model.step, data, steps=steps, checkpoint_dir=checkpoint_dir, every_steps=every_steps,
                        every_seconds=every_seconds, progress=progress)
    return {"accuracy": model.accuracy(test_x, test_y), "train_accuracy": model.accuracy(train_x, train_y),
            "loss": result.loss, "start_step": result.start_step, "step": result.step, "losses": result.losses,
            "model": model}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--hidden", type=int, nargs="*", default=[128], help="hidden layer sizes")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--checkpoint-dir")
    parser.add_argument("--every-steps", type=int)
    parser.add_argument("--every-seconds", type=float)
    parser.add_argument("--devices", help="comma-separated, e.g. cpu:0,cpu:1: one layer per device")
    parser.add_argument("--seconds-per-step", type=float, default=0.0, help="slow the run down (to kill it mid-way)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    result = run(args.steps, tuple(args.hidden), args.batch_size, args.lr, args.momentum, args.checkpoint_dir,
                 args.every_steps, args.every_seconds, args.devices.split(",") if args.devices else None,
                 args.seconds_per_step)
    seconds = time.perf_counter() - began
    if args.json:
        print(json.dumps({key: value for key, value in result.items() if key != "model"}))
        return
    resumed = f" (resumed at step {result['start_step']})" if result["start_step"] else ""
    print(f"{result['step']} steps{resumed} in {seconds:.1f} s: loss {result['loss']:.4f}, "
          f"train accuracy {result['train_accuracy']:.4f}, test accuracy {result['accuracy']:.4f}")


if __name__ == "__main__":
    main()
