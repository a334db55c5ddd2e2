"""The default dictionary budget of Sketched-KONS and PROS-N-KONS (``max_atoms="auto"``).

KORS keeps ``O(d_eff(gamma_reg) log^2 t)`` atoms (Calandriello, Lazaric & Valko, ICML
2017): a bound that is small when the kernel's spectrum decays fast, but that no one
can evaluate before the stream is seen. On high-dimensional data with a wide-band
kernel (Fashion-MNIST images with an rbf of ``gamma=0.02``) ``d_eff(0.3)`` is in the
thousands and KORS keeps most early samples (about 0.86 per sample over the first
4,000), so a sample's ``O(m^2)`` update keeps growing and a pass over 60,000 images
does not finish in minutes.

``"auto"`` therefore adds a fixed budget on top of KORS: the dictionary stops growing
at ``AUTO_BUDGET / sqrt(n_matrices)`` atoms, ``n_matrices`` the number of second-order
matrices the learner updates per sample (1 when all classes share one, the squared
loss with ``eta="auto"``; one per class otherwise). Every sample then costs at most
about ``3 AUTO_BUDGET^2`` flops for its second-order update (two triangular solves and
a Sherman-Morrison update per matrix) whatever the loss, plus its kernel row against
the atoms. Until the budget is reached the learner is exactly the one with
``max_atoms=None``; after it, the Newton step continues in the span of the atoms
kept (the KORS draws go on, but no atom is added). Exact KONS (``method="kons"``) is
the reference and stays exact: ``"auto"`` leaves it unbounded.
"""

import math

import numpy as np

from ..utils._validation import check_scalar_param

AUTO_BUDGET = 1000
UNBOUNDED = np.iinfo(np.int64).max


def check_max_atoms(max_atoms):
    """Validate ``max_atoms``: ``"auto"``, None or an integer >= 1 (returned as is)."""
    if isinstance(max_atoms, str):
        if max_atoms != "auto":
            raise ValueError(f"max_atoms must be 'auto', None or an integer >= 1, got "
                             f"{max_atoms!r}.")
        return max_atoms
    return check_scalar_param(max_atoms, "max_atoms", low=1, low_inclusive=True,
                              integer=True, allow_none=True)


def auto_max_atoms(method, n_matrices):
    """The cap ``max_atoms="auto"`` resolves to (None: unbounded)."""
    if method == "kons":
        return None
    return max(1, int(AUTO_BUDGET / math.sqrt(n_matrices)))


def resolve_max_atoms(max_atoms, method, n_matrices):
    """The cap as an int, or None for no cap."""
    return auto_max_atoms(method, n_matrices) if max_atoms == "auto" else max_atoms


def cost_line(cap, n, d, n_matrices):
    """Words for a pass's first progress line: the cap and a bound on its cost."""
    if cap is None:
        return {"max_atoms": "unbounded (cost per sample grows with the dictionary)"}
    per_sample = 3.0 * n_matrices * cap * cap + 2.0 * cap * d
    return {"max_atoms": cap, "cost_at_most": f"{n * per_sample:.2g} flops "
            f"({per_sample:.2g} per sample once {cap} atoms are kept)"}
