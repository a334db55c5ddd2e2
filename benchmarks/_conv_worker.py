"""One side of one case of ``bench_conv_kernels.py``, in a fresh process.

    python _conv_worker.py {kernelkit,nt} SPEC_JSON IN_NPZ OUT_NPZ

Run by kernelkit's interpreter (side ``kernelkit``) or by the neural-tangents one
(side ``nt``: neural-tangents 0.6.5 on JAX 0.4, which cannot share kernelkit's
environment), so it imports neither at the top and needs only NumPy. ``IN_NPZ`` holds
the images ``X`` and ``Y`` (``(n, H, W, C)`` float64); ``SPEC_JSON`` the architecture
(a kernelkit ``layers`` list or a Myrtle name, ``w_std``, ``b_std``), ``repeats``
(timed calls; one when the first takes over ``single_s`` seconds) and neural-tangents'
``batch_size``. ``OUT_NPZ`` receives the NTK block ``k(X, Y)``, the
seconds of each timed call (after a warm-up that compiles), the resident memory after
imports and warm-up and the process's peak resident memory (``VmHWM``), in MiB.
"""

import json
import sys
import time

import numpy as np
from _common import proc_status_kib  # NumPy-only helpers, importable by both sides

_MYRTLE = {5: (2, 1, 1), 7: (2, 2, 2), 10: (3, 3, 3)}


def expand(layers):
    """A Myrtle name as its layer list (kernelkit's ``myrtle_layers``, GAP read-out)."""
    if not isinstance(layers, str):
        return [tuple(x) if isinstance(x, list) else x for x in layers]
    a, b, c = _MYRTLE[int(layers[len("myrtle"):])]
    block = [("conv", 3), "relu"]
    return block * a + [("avgpool", 2)] + block * b + [("avgpool", 2)] + block * c + ["gap"]


def nt_kernel_fn(layers, w_std, b_std, batch_size):
    """neural-tangents' ``stax`` network of ``layers`` + dense read-out, jitted and batched."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import neural_tangents as nt
    from neural_tangents import stax

    net = []
    for layer in expand(layers):
        if layer == "relu":
            net.append(stax.Relu())
        elif layer == "erf":
            net.append(stax.Erf())
        elif layer == "flatten":
            net.append(stax.Flatten())
        elif layer == "gap":
            net.append(stax.GlobalAvgPool())
        elif layer[0] == "conv":
            padding = (layer[2] if len(layer) > 2 else "same").upper()
            net.append(stax.Conv(1, (layer[1], layer[1]), padding=padding, W_std=w_std,
                                 b_std=b_std, parameterization="ntk"))
        else:  # ("avgpool", s)
            net.append(stax.AvgPool((layer[1], layer[1]), strides=(layer[1], layer[1])))
    net.append(stax.Dense(1, W_std=w_std, b_std=b_std, parameterization="ntk"))
    kernel_fn = jax.jit(stax.serial(*net)[2], static_argnames="get")
    batched = nt.batch(kernel_fn, batch_size=batch_size, store_on_device=False)
    return lambda X, Y: np.asarray(batched(X, Y, "ntk"), dtype=np.float64)


def kernelkit_fn(layers, w_std, b_std):
    import kernelkit
    from kernelkit.kernels import ConvNTK

    kernelkit.set_config(backend="numba")
    k = ConvNTK(layers=layers if isinstance(layers, str) else expand(layers),
                w_std=w_std, b_std=b_std)
    return lambda X, Y: k(X, Y)


def main(side, spec_path, in_path, out_path):
    spec = json.loads(open(spec_path).read())
    data = np.load(in_path)
    X, Y = data["X"], data["Y"]
    if side == "nt":
        bs = spec["batch_size"]
        fn = nt_kernel_fn(spec["layers"], spec["w_std"], spec["b_std"], bs)
        fn(X[:bs], Y[:bs])  # compiles the jitted batch (same shapes as every batch)
    else:
        fn = kernelkit_fn(spec["layers"], spec["w_std"], spec["b_std"])
        fn(X[:2], Y[:2])  # loads (or compiles) the Numba functions
    base = proc_status_kib("VmRSS") / 1024
    times = []
    while len(times) < spec["repeats"]:  # one call only when it is long
        t0 = time.perf_counter()
        K = fn(X, Y)
        times.append(time.perf_counter() - t0)
        if times[0] > spec["single_s"]:
            break
    np.savez(out_path, K=K, times=np.array(times), base_mib=base,
             peak_mib=proc_status_kib("VmHWM") / 1024)


if __name__ == "__main__":
    main(*sys.argv[1:5])
