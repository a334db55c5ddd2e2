"""Command line of kernelkit: python -m kernelkit demo | info."""

import argparse
import platform
import sys


def _info():
    import numpy
    import scipy
    import sklearn

    from . import __version__, get_config
    from .backend import available_backends

    print(f"kernelkit {__version__} on Python {platform.python_version()} ({platform.machine()})")
    print(f"numpy {numpy.__version__}, scipy {scipy.__version__}, "
          f"scikit-learn {sklearn.__version__}")
    try:
        import numba

        print(f"numba {numba.__version__}, {numba.get_num_threads()} threads")
    except ImportError:
        print("numba: not installed")
    print(f"usable backends: {', '.join(available_backends())}")
    print(f"config: {get_config()}")


def main(argv=None):
    """Entry point of ``python -m kernelkit``."""
    parser = argparse.ArgumentParser(prog="python -m kernelkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="kernelkit vs scikit-learn on bundled real data sets")
    demo.add_argument("--datasets", nargs="+", choices=["digits", "breast_cancer", "diabetes"],
                      help="subset of data sets (default: all)")
    sub.add_parser("info", help="versions and usable backends")
    args = parser.parse_args(argv)
    if args.command == "info":
        _info()
    else:
        from ._demo import run_demo

        run_demo(args.datasets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
