"""Regenerate conv_reference.npz: convolutional NNGP / NTK values from neural-tangents.

Not run by the tests (neural-tangents needs an old JAX stack). Made with
neural-tangents 0.6.5, jax/jaxlib 0.4.23, tensorflow 2.15.1, numpy 1.26 on CPU, Python
3.9 to 3.11 (TensorFlow 2.15 has no wheels for 3.12; neural-tangents requires the
``tensorflow`` distribution, so ``tensorflow-cpu`` alone sends pip backtracking):

    python3.11 -m venv ntenv && ntenv/bin/pip install "neural-tangents==0.6.5" \
        "jax[cpu]==0.4.23" "jaxlib==0.4.23" "tensorflow==2.15.1" "numpy<2" "scipy<1.13"
    ntenv/bin/python make_conv_reference.py

The same environment runs the neural-tangents side of
``benchmarks/bench_conv_kernels.py`` (``--nt-python ntenv/bin/python``).

Each architecture is a kernelkit ``layers`` list (stored as JSON under ``archs``, with
``w_std``, ``b_std`` and the image set) translated here to ``stax`` layers in the NTK
parameterization: ``("conv", f[, padding])`` -> ``Conv(1, (f, f), padding=...)``,
``"relu"`` / ``"erf"`` -> ``Relu()`` / ``Erf()``, ``("avgpool", s)`` ->
``AvgPool((s, s), (s, s))``, ``"flatten"`` / ``"gap"`` -> ``Flatten()`` /
``GlobalAvgPool()``, then the read-out ``Dense(1, w_std, b_std)``. Keys:
``{ntk,nngp}_{xy,xx}_<name>``; image sets ``X_<set>``, ``Y_<set>``. ``myrtle5_32nt``
is neural-tangents' own Myrtle-5 (three 2x2 pools and a flatten at the end) on 32x32
images, to be compared with kernelkit's ``"myrtle5"`` (a global average pool there).
"""

import json

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402
from neural_tangents import stax  # noqa: E402

R2 = 2.0**0.5
C3 = ("conv", 3)
CV = ("conv", 3, "valid")
C1 = ("conv", 1)
ARCHS = {  # name: (layers, w_std, b_std, image set)
    "f3_relu_d1_flat": ([C3, "relu", "flatten"], 1.0, None, "s8"),
    "f3_relu_d2_flat_b": ([C3, "relu"] * 2 + ["flatten"], 1.5, 0.1, "s8"),
    "f3_erf_d3_flat_b": ([C3, "erf"] * 3 + ["flatten"], 1.2, 0.3, "s8"),
    "f3v_relu_d3_flat": ([CV, "relu"] * 3 + ["flatten"], R2, None, "s8"),
    "f3v_erf_d1_flat": ([CV, "erf", "flatten"], 1.0, None, "s8"),
    "f1_relu_d2_flat_b": ([C1, "relu"] * 2 + ["flatten"], 1.3, 0.2, "s8"),
    "f1_erf_d1_flat": ([C1, "erf", "flatten"], 1.0, None, "s8"),
    "f3_relu_d1_gap": ([C3, "relu", "gap"], 1.0, None, "s8"),
    "f3_relu_d3_gap_b": ([C3, "relu"] * 3 + ["gap"], R2, 0.1, "s8"),
    "f3_erf_d2_gap": ([C3, "erf"] * 2 + ["gap"], 1.2, None, "s8"),
    "f3v_relu_d2_gap_b": ([CV, "relu"] * 2 + ["gap"], 1.0, 0.5, "s8"),
    "f3v_erf_d3_gap_b": ([CV, "erf"] * 3 + ["gap"], 1.1, 0.2, "s8"),
    "f1_relu_d3_gap": ([C1, "relu"] * 3 + ["gap"], 1.0, None, "s8"),
    "f1_erf_d2_gap_b": ([C1, "erf"] * 2 + ["gap"], 1.0, 0.3, "s8"),
    "pool_flat_b": ([C3, "relu", ("avgpool", 2), C3, "relu", "flatten"], R2, 0.1, "s8"),
    "pool_erf_gap": ([C3, "erf", ("avgpool", 2), ("conv", 2), "erf", "gap"], 1.0, None,
                     "s8"),
    "myrtle5_8": ("myrtle5", R2, None, "m8"),
    "myrtle7_8_b": ("myrtle7", R2, 0.1, "m8"),
    "myrtle5_28": ("myrtle5", R2, None, "m28"),
}
IMAGES = {"s8": (8, 8, 2, 5, 3), "m8": (8, 8, 3, 4, 2), "m28": (28, 28, 1, 2, 2),
          "m32": (32, 32, 3, 2, 1)}  # H, W, C, rows of X (before extras), rows of Y
_MYRTLE = {5: (2, 1, 1), 7: (2, 2, 2), 10: (3, 3, 3)}


def _myrtle(depth, gap=True):
    a, b, c = _MYRTLE[depth]
    block = [("conv", 3), "relu"]
    tail = ["gap"] if gap else [("avgpool", 2)] * 3 + ["flatten"]
    return block * a + [("avgpool", 2)] + block * b + [("avgpool", 2)] + block * c + tail


def network(layers, w_std, b_std):
    if isinstance(layers, str):
        layers = _myrtle(int(layers[len("myrtle"):]))
    out = []
    for layer in layers:
        if isinstance(layer, str):
            out.append({"relu": stax.Relu, "erf": stax.Erf, "flatten": stax.Flatten,
                        "gap": stax.GlobalAvgPool}[layer]())
        elif layer[0] == "conv":
            pad = (layer[2] if len(layer) > 2 else "same").upper()
            out.append(stax.Conv(1, (layer[1],) * 2, padding=pad, W_std=w_std, b_std=b_std,
                                 parameterization="ntk"))
        else:
            out.append(stax.AvgPool((layer[1],) * 2, strides=(layer[1],) * 2))
    out.append(stax.Dense(1, W_std=w_std, b_std=b_std, parameterization="ntk"))
    return stax.serial(*out)


def images(h, w, c, n, m, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, h, w, c))
    if n >= 4:  # a zero image, a multiple of one and a near-duplicate of another
        X = np.concatenate([X, np.zeros((1, h, w, c)), 3.0 * X[:1], X[1:2] + 1e-9])
    return X, rng.standard_normal((m, h, w, c))


def main():
    out, archs = {}, {}
    for seed, (name, spec) in enumerate(IMAGES.items()):
        out[f"X_{name}"], out[f"Y_{name}"] = images(*spec, seed)
    todo = dict(ARCHS, myrtle5_32nt=(_myrtle(5, gap=False), R2, None, "m32"))
    for name, (layers, w_std, b_std, image_set) in todo.items():
        kernel_fn = network(layers, w_std, b_std)[2]
        X, Y = out[f"X_{image_set}"], out[f"Y_{image_set}"]
        for tag, B in (("xy", Y), ("xx", None)):
            nngp, ntk = kernel_fn(X, B, ("nngp", "ntk"))
            out[f"nngp_{tag}_{name}"] = np.asarray(nngp, dtype=np.float64)
            out[f"ntk_{tag}_{name}"] = np.asarray(ntk, dtype=np.float64)
        archs[name] = {"layers": layers, "w_std": w_std, "b_std": b_std, "images": image_set}
    out["archs"] = np.array(json.dumps(archs))
    np.savez_compressed("conv_reference.npz", **out)


if __name__ == "__main__":
    main()
