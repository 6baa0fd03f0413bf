"""Train a small numpy MLP on two interleaved spirals, logging with runlines.

Run: python examples/train.py [--epochs N] [--out DIR] [--name NAME]

It logs every mini-batch through a sampler, times evaluation with a span, saves the validation
predictions as an artifact and registers its checkpoint, then prints a summary read back from
its own log.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import runlines
from runlines import Run


def make_spirals(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Return n points of two interleaved spirals and their 0/1 labels."""
    labels = rng.integers(0, 2, n)
    radius = rng.uniform(0.2, 1.0, n)
    angle = 3.0 * np.pi * radius + np.pi * labels
    points = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return points + rng.normal(0.0, 0.03, points.shape), labels


class MLP:
    """A two-layer perceptron with a tanh hidden layer and a sigmoid output."""

    def __init__(self, hidden: int, rng: np.random.Generator) -> None:
        self.w1 = rng.normal(0.0, 1.0, (2, hidden))
        self.b1 = np.zeros(hidden)
        self.w2 = rng.normal(0.0, 1.0 / np.sqrt(hidden), hidden)
        self.b2 = 0.0

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        hidden = np.tanh(x @ self.w1 + self.b1)
        return hidden, 1.0 / (1.0 + np.exp(-(hidden @ self.w2 + self.b2)))

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> tuple[float, float]:
        """Take one SGD step on a batch; return the loss and the gradient norm."""
        hidden, prob = self.forward(x)
        eps = 1e-9
        loss = float(-np.mean(y * np.log(prob + eps) + (1 - y) * np.log(1 - prob + eps)))
        d_out = (prob - y) / len(y)
        d_hidden = np.outer(d_out, self.w2) * (1 - hidden**2)
        grads = [x.T @ d_hidden, d_hidden.sum(0), hidden.T @ d_out, d_out.sum()]
        self.w1 -= lr * grads[0]
        self.b1 -= lr * grads[1]
        self.w2 -= lr * grads[2]
        self.b2 -= lr * grads[3]
        return loss, float(np.sqrt(sum(np.sum(np.square(g)) for g in grads)))

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        prob = self.forward(x)[1]
        return float(np.mean((prob > 0.5) == y)), prob


def train(args: argparse.Namespace) -> Path:
    """Train and log one run; return its log file."""
    rng = np.random.default_rng(args.seed)
    x_train, y_train = make_spirals(4000, rng)
    x_val, y_val = make_spirals(1000, rng)
    model = MLP(args.hidden, rng)
    config = {"epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size}
    config.update(hidden=args.hidden, seed=args.seed)
    with Run(args.name, args.out, config=config) as run:
        run.sample("batch", every=25)  # per-batch records: 1 in 25 reaches the log
        step = 0
        for epoch in range(1, args.epochs + 1):
            order = rng.permutation(len(x_train))
            lr = args.lr * (0.5 ** (epoch // 10))
            for start in range(0, len(order), args.batch_size):
                batch = order[start : start + args.batch_size]
                loss, grad_norm = model.step(x_train[batch], y_train[batch], lr)
                step += 1
                run.log("batch", epoch=epoch, step=step, loss=loss, lr=lr, grad_norm=grad_norm)
            with run.span("eval", split="val"):
                accuracy, prob = model.accuracy(x_val, y_val)
            run.log("eval", epoch=epoch, step=step, accuracy=accuracy, split="val")
        run.artifact("val_predictions", prob, step=step)
        checkpoint = Path(args.out) / f"{args.name}-model.npz"
        np.savez(checkpoint, w1=model.w1, b1=model.b1, w2=model.w2, b2=model.b2)
        run.artifact("checkpoint", path=checkpoint, step=step)
    return run.path


def summarize(path: Path) -> None:
    """Print the loss per epoch and the final accuracy, read back from the log."""
    df = runlines.load(path)
    batches = df[df.event == "batch"]
    loss = batches.groupby("epoch").loss.mean().round(3)
    evals = df[df.event == "eval"]
    end = df[df.event == "run_end"].iloc[-1]
    print(f"\nlog: {path}")
    print("mean sampled batch loss by epoch:", ", ".join(f"{e}: {v}" for e, v in loss.items()))
    print(f"validation accuracy: {evals.accuracy.iloc[0]:.3f} -> {evals.accuracy.iloc[-1]:.3f}")
    print(f"batches logged: {int(batches.n.sum())} in {len(batches)} records")
    print(f"status: {end.status}, {end.duration_s:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs")
    parser.add_argument("--name", default="spirals")
    args = parser.parse_args()
    summarize(train(args))


if __name__ == "__main__":
    main()
