"""Regenerate neural_tangents_reference.npz: infinite-width kernels from neural-tangents.

Not run by the tests (neural-tangents needs an old JAX/TensorFlow stack). Made with
neural-tangents 0.6.5, jax/jaxlib 0.4.23, tensorflow 2.15.1, numpy 1.26 on CPU:

    python -m venv ntenv && ntenv/bin/pip install "neural-tangents==0.6.5" \
        "jax[cpu]==0.4.23" "jaxlib==0.4.23" "tensorflow==2.15.1" "numpy<2" "scipy<1.13"
    ntenv/bin/python make_neural_tangents_reference.py

Architectures (NTK parameterization): ``[Dense(w_std, b_std), act] * depth`` and a
readout ``Dense(w_std, b_std)``; keys ``{ntk,nngp}_{xy,xx}_<name>``.
"""

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402
from neural_tangents import stax  # noqa: E402

ARCHS = {  # name: (depth, activation, w_std, b_std)
    "relu_d1": (1, "relu", 1.0, None),
    "relu_d3_b": (3, "relu", 1.5, 0.1),
    "relu_d2_b05": (2, "relu", 2.0**0.5, 0.5),
    "erf_d1": (1, "erf", 1.0, None),
    "erf_d2_b": (2, "erf", 1.2, 0.3),
}


def network(depth, act, w_std, b_std):
    layer = [stax.Dense(512, W_std=w_std, b_std=b_std, parameterization="ntk"),
             stax.Relu() if act == "relu" else stax.Erf()]
    return stax.serial(*(layer * depth), stax.Dense(1, W_std=w_std, b_std=b_std,
                                                    parameterization="ntk"))


def main():
    X = np.random.default_rng(0).standard_normal((7, 5))
    X = np.vstack([X, np.zeros((1, 5)), 3.0 * X[:1], X[1:2] + 1e-9])  # zero, parallel, near-dup
    Y = np.random.default_rng(1).standard_normal((4, 5))
    out = {"X": X, "Y": Y}
    for name, arch in ARCHS.items():
        kernel_fn = network(*arch)[2]
        for tag, B in (("xy", Y), ("xx", None)):
            nngp, ntk = kernel_fn(X, B, ("nngp", "ntk"))
            out[f"nngp_{tag}_{name}"] = np.asarray(nngp, dtype=np.float64)
            out[f"ntk_{tag}_{name}"] = np.asarray(ntk, dtype=np.float64)
    np.savez_compressed("neural_tangents_reference.npz", **out)


if __name__ == "__main__":
    main()
