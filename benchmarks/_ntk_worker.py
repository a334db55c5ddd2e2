"""neural-tangents' side of ``bench_kernels.py``'s NTK comparison, a long-lived process.

    python _ntk_worker.py IN_NPZ DEPTH

Run by the neural-tangents interpreter (neural-tangents 0.6.5 on JAX, which cannot share
kernelkit's environment), so it needs only NumPy besides them. ``IN_NPZ`` holds ``X``
(float64). The network is ``depth`` x (Dense, Relu) + Dense read-out, NTK
parameterization, ``W_std = 1``, no bias: kernelkit's ``NTK(depth)``. Its kernel function
is jitted and called once on ``X`` to compile; the worker then prints ``ready`` and, for
each line read from stdin, does one thing and prints one line:

* ``time``: one call ``k(X, X)`` (float64, blocked until done), prints its seconds;
* ``save PATH``: writes the last result to ``PATH`` (``.npy``), prints ``saved``;
* ``quit``: exits.

So the parent alternates single calls of the two sides, each in its own process.
"""

import sys
import time

import numpy as np


def kernel_fn(depth):
    import jax

    jax.config.update("jax_enable_x64", True)
    from neural_tangents import stax

    layers = []
    for _ in range(depth):
        layers += [stax.Dense(1, W_std=1.0, b_std=None, parameterization="ntk"), stax.Relu()]
    layers.append(stax.Dense(1, W_std=1.0, b_std=None, parameterization="ntk"))
    fn = jax.jit(stax.serial(*layers)[2], static_argnames="get")
    return lambda X: np.asarray(fn(X, None, "ntk").block_until_ready(), dtype=np.float64)


def main(in_path, depth):
    X = np.load(in_path)["X"]
    fn = kernel_fn(int(depth))
    K = fn(X)  # compiles for this shape
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] == "time":
            t0 = time.perf_counter()
            K = fn(X)
            print(f"{time.perf_counter() - t0:.6f}", flush=True)
        elif cmd[0] == "save":
            np.save(cmd[1], K)
            print("saved", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
