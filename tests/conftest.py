import numpy as np
import pytest

from kernelkit.backend import available_backends
from kernelkit.backend._cupy import CupyBackend
from kernelkit.backend._numba import NumbaBackend
from kernelkit.backend._numpy import NumpyBackend


def _engines():
    """Every engine testable here; the CuPy engine's array code runs on NumPy without a GPU."""
    engines = {"numpy": NumpyBackend, "numba": NumbaBackend,
               "cupy-on-numpy": lambda: CupyBackend(xp=np)}
    if "cupy" in available_backends():
        engines["cupy"] = CupyBackend
    return engines


ENGINES = _engines()


@pytest.fixture(params=sorted(ENGINES))
def engine(request):
    """An engine instance, for comparison with the NumPy reference."""
    return ENGINES[request.param]()


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def auto_model_from_1024(monkeypatch):
    """``solver="auto"`` consults its cost model from 1,024 samples (its default threshold,
    3,000, would make the tests of the model's branches slow), and draws its sketch
    wherever PCG could win at all (at that size what PCG could save never pays for
    the sketch 10 times: ``_PAYBACK`` has its own test)."""
    from kernelkit.ridge import _auto

    monkeypatch.setattr(_auto, "AUTO_MIN_SAMPLES", 1024)
    monkeypatch.setattr(_auto, "_PAYBACK", 0.0)
