"""Write Fashion-MNIST as one compressed array file for ``bench_gpu.py``.

The GPU machine reaches no network and has no Debian data package, so the data
travel with the working tree: this script reads the 70,000 images from the
``dataset-fashion-mnist`` package (through ``_common.load_fashion_mnist``) and
writes ``benchmarks/data/fashion_mnist.npz`` (``X_train`` uint8 (60000, 784),
``y_train`` uint8, ``X_test`` uint8 (10000, 784), ``y_test`` uint8; about 30 MB).
The file is git-ignored: carry it to the device (``carry=["benchmarks/data/fashion_mnist.npz"]``).

Usage::

    python benchmarks/gpu_data.py [--out PATH]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA_PATH = HERE / "data" / "fashion_mnist.npz"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DATA_PATH, help="output .npz path")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from _common import load_fashion_mnist

    Xa, ya, Xt, yt = load_fashion_mnist()
    # the loader scales to [0, 1]; the file keeps the exact bytes
    arrays = {"X_train": np.rint(Xa * 255).astype(np.uint8), "y_train": ya.astype(np.uint8),
              "X_test": np.rint(Xt * 255).astype(np.uint8), "y_test": yt.astype(np.uint8)}
    assert np.array_equal(arrays["X_train"] / 255.0, Xa)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB): "
          + ", ".join(f"{k} {v.shape}" for k, v in arrays.items()))


def load(path=DATA_PATH):
    """(X_train, y_train, X_test, y_test) from the file: float32 pixels in [0, 1], int labels.

    Raises
    ------
    SystemExit
        If the file is missing (with the command that writes it).
    """
    if not Path(path).exists():
        raise SystemExit(f"{path} not found: write it with `python benchmarks/gpu_data.py` "
                         "(needs the dataset-fashion-mnist package) and carry it to the device.")
    with np.load(path) as f:
        return (f["X_train"].astype(np.float32) / 255, f["y_train"].astype(np.int64),
                f["X_test"].astype(np.float32) / 255, f["y_test"].astype(np.int64))


if __name__ == "__main__":
    main()
