"""Regenerate gp_ensemble_reference.npz: infinite-ensemble moments from neural-tangents.

Not run by the tests (neural-tangents needs an old JAX/TensorFlow stack). Made with
neural-tangents 0.6.5, jax/jaxlib 0.4.23, tensorflow 2.15.1, numpy 1.26, Python 3.11, CPU:

    python -m venv ntenv && ntenv/bin/pip install "neural-tangents==0.6.5" \
        "jax[cpu]==0.4.23" "jaxlib==0.4.23" "tensorflow==2.15.1" "numpy<2" "scipy<1.13"
    ntenv/bin/python make_gp_ensemble_reference.py

``nt.predict.gradient_descent_mse_ensemble`` (absolute ``diag_reg``) on the test rows
at ``t`` in TIMES (``t=None``, neural-tangents' converged solve, for ``inf``), for
``get`` in {ntk, nngp}; keys ``{get}_{mean,cov}_<arch>`` of shapes
``(len(TIMES), n_test, n_outputs)`` and ``(len(TIMES), n_test, n_test)``.
"""

import jax

jax.config.update("jax_enable_x64", True)
import neural_tangents as nt  # noqa: E402
import numpy as np  # noqa: E402
from neural_tangents import stax  # noqa: E402

TIMES = (0.0, 1.0, 10.0, np.inf)
LEARNING_RATE = 2.0
DIAG_REG = 1e-2
ARCHS = {}  # name: (depth, activation, w_std, b_std)
for _act in ("relu", "erf"):
    for _depth in (1, 2, 3):
        ARCHS[f"{_act}_d{_depth}"] = (_depth, _act, 1.3, None)
        ARCHS[f"{_act}_d{_depth}_b"] = (_depth, _act, 1.3, 0.4)


def network(depth, act, w_std, b_std):
    layer = [stax.Dense(512, W_std=w_std, b_std=b_std, parameterization="ntk"),
             stax.Relu() if act == "relu" else stax.Erf()]
    return stax.serial(*(layer * depth), stax.Dense(1, W_std=w_std, b_std=b_std,
                                                    parameterization="ntk"))


def main():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 4))
    Y = np.stack([np.sin(X[:, 0]) + X[:, 1], np.cos(X[:, 2])], axis=1)
    Xt = rng.standard_normal((5, 4))
    out = {"X": X, "Y": Y, "X_test": Xt, "times": np.array(TIMES),
           "learning_rate": LEARNING_RATE, "diag_reg": DIAG_REG}
    for name, arch in ARCHS.items():
        kernel_fn = network(*arch)[2]
        predict = nt.predict.gradient_descent_mse_ensemble(
            kernel_fn, X, Y, learning_rate=LEARNING_RATE, diag_reg=DIAG_REG,
            diag_reg_absolute_scale=True)
        for get in ("ntk", "nngp"):
            means, covs = [], []
            for t in TIMES:
                g = predict(t=None if np.isinf(t) else t, x_test=Xt, get=get, compute_cov=True)
                means.append(np.asarray(g.mean, dtype=np.float64))
                covs.append(np.asarray(g.covariance, dtype=np.float64))
            out[f"{get}_mean_{name}"] = np.stack(means)
            out[f"{get}_cov_{name}"] = np.stack(covs)
    np.savez_compressed("gp_ensemble_reference.npz", **out)


if __name__ == "__main__":
    main()
