"""Convolutional kernels (ConvNTK): time per image pair, Numba engine vs NumPy reference.

Architectures on the 8x8 digits (flatten, GAP, Myrtle-5) and on 28x28 images
(Myrtle-5), both engines on the same images, values checked equal before timing.
Medians of repeated calls after a warm-up (Numba compiles lazily). Prints a table;
the full run also writes ``results_conv_kernels.json``. The comparison with
neural-tangents needs its own environment (JAX 0.4) and is not run here.

    python benchmarks/bench_conv_kernels.py [--quick]
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from _common import load_average, machine_info, machine_line

import kernelkit
from kernelkit.kernels import ConvNTK

CONV = [("conv", 3), "relu"]
CASES = {  # name: (layers, image side, rows of X, rows of Y)
    "digits 8x8, 3 conv + flatten": (CONV * 3 + ["flatten"], 8, 60, 60),
    "digits 8x8, 2 conv + GAP": (CONV * 2 + ["gap"], 8, 30, 30),
    "digits 8x8, Myrtle-5": ("myrtle5", 8, 30, 30),
    "28x28, Myrtle-5": ("myrtle5", 28, 3, 3),
}


def _time(f, repeats):
    f()  # warm-up: compilation, caches
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows and repeats; print only")
    args = parser.parse_args(argv)
    scale, repeats = (0.5, 1) if args.quick else (1.0, 5)
    rng = np.random.default_rng(0)
    before = load_average()
    rows = []
    for name, (layers, side, n, m) in CASES.items():
        n, m = max(2, int(n * scale)), max(2, int(m * scale))
        X, Y = rng.random((n, side, side, 1)), rng.random((m, side, side, 1))
        k = ConvNTK(layers=layers, w_std=2**0.5)
        out, med = {}, {}
        for engine in ("numba", "numpy"):
            with kernelkit.config_context(backend=engine):
                out[engine] = k(X, Y)
                med[engine] = _time(lambda: k(X, Y), repeats) / (n * m + n + m)
        np.testing.assert_allclose(out["numba"], out["numpy"], rtol=1e-12)
        rows.append({"case": name, "pairs": n * m, "numba_us": 1e6 * med["numba"],
                     "numpy_us": 1e6 * med["numpy"], "ratio": med["numpy"] / med["numba"]})
        print(f"{name:32s} numba {rows[-1]['numba_us']:10.1f} us/pair   numpy "
              f"{rows[-1]['numpy_us']:10.1f} us/pair   numpy/numba {rows[-1]['ratio']:5.2f}")
    info = machine_info()
    print(machine_line(info, loads=(before, load_average())))
    if not args.quick:
        path = Path(__file__).with_name("results_conv_kernels.json")
        path.write_text(json.dumps({"machine": info, "rows": rows}, indent=1, default=str))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
