"""Pick a method's sequential loops for the resolved engine.

A method folder keeps its branchy sequential loops twice: ``_loops.py`` (NumPy, the
reference) and ``_loops_numba.py`` (the same functions compiled by Numba, same
signatures). The estimator asks for the module by the resolved engine name.
"""

import importlib


def select_loops(package, engine_name):
    """The loops module of ``package`` for engine ``engine_name``.

    Parameters
    ----------
    package : str
        The method's package, e.g. ``"kernelkit.leverage"`` (pass ``__package__``).
    engine_name : {"numpy", "numba", "cupy"}
        Resolved backend name. ``"numba"`` gets the compiled twin; ``"numpy"`` and
        ``"cupy"`` (whose loops are inherently serial and run on the host) the reference.

    Returns
    -------
    module
    """
    name = "_loops_numba" if engine_name == "numba" else "_loops"
    return importlib.import_module(f"{package}.{name}")
