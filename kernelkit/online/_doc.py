"""Shared numpydoc sections of the KONS estimators (parameters, attributes, notes)."""

_PARAMS_DOC = """
    method : {{"kons", "sketched", "pros-n-kons"}}, default="sketched"
        ``"kons"``: exact KONS (every sample outside the span of the stored ones
        becomes an atom; ``O(t^2)`` time and memory at step ``t``; the reference for
        short streams). ``"sketched"``: Sketched-KONS, atoms drawn by KORS (online
        ridge-leverage-score sampling) and the Newton step run in their span,
        continued when an atom arrives. ``"pros-n-kons"``: the same dictionary, with
        the learner restarted on the new embedding at each new atom (PROS-N-KONS).
    kernel : str, Kernel or callable, default="rbf"
        A kernelkit kernel name, a :class:`kernelkit.kernels.Kernel` or a callable
        ``f(X, Y)``; ``"precomputed"`` is not possible online.
    gamma : float, default=None
        Kernel scale (rbf, laplacian, matern, polynomial); None means ``1 / n_features``.
    degree, coef0 : float, default=3, 1
        Polynomial kernel parameters.
    kernel_params : dict, default=None
        Further parameters of the named kernel or of the callable.
    alpha : float > 0, default=0.1
        The paper's regulariser ``alpha``: the second-order matrix starts at
        ``alpha I`` (``A_0`` of Algorithm 1); for the squared loss it is the ridge
        penalty of online kernel ridge, in units of the kernel (``k(x, x) = 1`` for
        rbf). Larger: smaller first steps, smoother fits. The default is the middle
        of the settings tuned on the documented streams (0.01 to 0.3): the regret
        bound's ``alpha ||f*||^2`` term favours a small ``alpha`` on data of unit
        kernel scale, and 0.1 keeps the prequential error within 10% of the tuned
        one on digits regression.
    eta : "auto" or float > 0, default="auto"
        The paper's step sizes ``eta_t`` (``A_t = A_{{t-1}} + eta_t g_t g_t^T``).
        ``"auto"`` takes the loss's local curvature, ``eta_t g_t g_t^T = l''(f_t)
        z_t z_t^T``: for the squared loss this is the largest ``eta_t = sigma_t``
        the paper's curvature condition allows, and KONS becomes kernel recursive
        least squares (online ridge). A number: the fixed ``eta`` of the theorems.
    C : float > 0 or None, default=None
        The paper's feasible set ``|f(x_t)| <= C``: predictions beyond ``C`` are
        projected back in the ``A_{{t-1}}`` norm (Algorithm 1, line 7). None: no bound.
    gamma_reg : float > 0, default=0.3
        KORS's ridge regularisation ``gamma`` (in units of ``k(x, x)``): smaller keeps
        more atoms and a more accurate embedding (the dictionary grows as
        ``d_eff(gamma_reg)``), at a cost per sample growing as their square. The
        default keeps about half of the 1797 digits samples as atoms, with a
        prequential error within 10% of the tuned setting's and a shorter run.
        Ignored by ``method="kons"``.
    epsilon : float >= 0, default=0.5
        KORS's accuracy ``epsilon``: the sampling probabilities are inflated by
        ``(1 + epsilon)``-accurate leverage-score estimates.
    beta : float > 0, default=1.0
        KORS's oversampling ``beta``: ``p_t = min(beta tau_t, 1)``.
    max_atoms : "auto", int >= 1 or None, default="auto"
        Hard cap on the number of atoms (memory ``O(max_atoms^2)``, time ``O(max_atoms^2)``
        per sample); once reached, no atom is added and the learner continues in the
        span of the atoms kept. None: KORS alone bounds the dictionary
        (``O(d_eff(gamma_reg) log^2 t)`` atoms with high probability, the ICML paper's
        bound, which is in the thousands for wide-band kernels on high-dimensional data:
        with ``gamma=0.02`` on Fashion-MNIST KORS keeps most early images).
        ``"auto"``: a fixed budget of ``int(1000 / sqrt(n_matrices))`` atoms on top of
        KORS for ``"sketched"`` and ``"pros-n-kons"``, ``n_matrices`` the number of
        second-order matrices (1 for the squared loss with ``eta="auto"``, else one per
        class), so that a sample costs at most about ``3e6`` flops plus its kernel row
        whatever the loss; until the budget is reached the model is the one of
        ``max_atoms=None``. Exact KONS stays exact (unbounded). The value used is
        ``max_atoms_``.
    forgetting : {{None, "discount", "restart"}}, default=None
        For drifting streams. ``"discount"``: ``A_t = lam A_{{t-1}} + ...`` with
        ``lam = 1 - 1 / memory`` (exponentially weighted second-order information;
        directions the stream no longer visits lose certainty up to ``memory / alpha``
        and no further, against the classic wind-up): tracks drift, at the price of
        noisier steps on stationary data. ``"restart"``: reset ``A`` to ``alpha I``
        every ``memory`` samples, keeping the current function: cheaper, coarser.
    memory : int >= 1, default=1000
        Number of recent samples the forgetting keeps (effective window).
    random_state : int, RandomState instance or None, default=None
        Seeds KORS's Bernoulli draws.
    backend : {{"auto", "numpy", "numba", "cupy"}} or None, default=None
        Engine for the kernel blocks; ``"numba"`` (and ``"auto"`` when Numba is
        installed) also runs the per-sample loop compiled. Resolved into ``backend_``.
    verbose : int, default=0
        When >= 1: a first line before the pass (its size, the dictionary cap and a
        bound on the flops it will take), then progress lines every ~5000 samples."""

_ATTRS_DOC = """
    n_atoms_ : int
        Number of stored atoms (the model's support; bounded by the sketch).
    max_atoms_ : int or None
        The cap in force (``max_atoms`` with ``"auto"`` resolved; None: no cap). A
        classifier that meets new labels (river) may get more second-order matrices
        and a lower ``"auto"`` cap than the atoms it holds: those stay, none is added.
    atoms_ : ndarray of shape (`n_atoms_`, `n_features_in_`)
        The stored samples.
    cumulative_loss_ : float
        Sum of the losses of the prequential predictions (each sample predicted
        before the model learned from it), over all samples seen.
    n_seen_ : int
        Number of samples learned from since the last ``fit``.
    n_restarts_ : int
        Restarts of the learner (PROS-N-KONS's new atoms, ``forgetting="restart"``).
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names."""

_NOTES_DOC = """
    The model is ``f(x) = w^T z(x)`` with ``z(x) = L^{{-1}} k_D(x)`` the coordinates of
    ``phi(x)`` in an orthonormal basis of the span of the atoms ``D`` (``K_DD = L L^T``).
    Per sample (predict, then update): the KORS draw, the prediction and its
    projection, then the Online Newton Step ``A_t = A_{{t-1}} + eta_t g_t g_t^T``,
    ``w <- w - A_t^{{-1}} g_t`` with ``A^{{-1}}`` kept by Sherman-Morrison. With all
    samples as atoms this is exactly KONS (Algorithm 1): its iterates lie in the span
    of the seen samples, where these coordinates are exact. Sketched-KONS keeps the
    iterate in the span of the KORS dictionary, so that memory is bounded by the
    sketch (the ICML paper's variant sketches ``A`` only and stores every gradient).
    Cost per sample ``O(m^2 + m d)`` time for ``m`` atoms, memory ``O(m^2)`` (times
    the number of classes for per-class second-order matrices)."""
