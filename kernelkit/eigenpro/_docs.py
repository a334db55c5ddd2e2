"""Shared numpydoc sections of the EigenPro estimators."""

_PARAMS_DOC = """
    n_centers : None, int, float or array-like of shape (n_centers, n_features), \
default=None
        The model's centers. None: the training points (**EigenPro 2** by default).
        An int: that many training points drawn at random; a float in (0, 1]: that
        fraction of the training points; an array: these centers exactly
        (``centers_`` equals them, at their own precision); trained by **EigenPro 4** by
        default (see ``algorithm``).
    kernel : str, Kernel or callable, default="rbf"
        A name ({names}), a :class:`kernelkit.kernels.Kernel` (e.g.
        ``NTK(depth=3)``; its parameters are tunable as ``kernel__<name>``) or a
        callable ``f(X, Y) -> (n_X, n_Y)`` evaluated on the host. ``"precomputed"``
        is rejected: EigenPro never forms the kernel matrix.
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means
        ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel (e.g. ``{{"nu": 2.5}}``,
        ``{{"depth": 3}}``) or of the callable.
    alpha : float >= 0, default=0.0
        Ridge penalty, in the convention of :class:`sklearn.kernel_ridge.KernelRidge`
        (EigenPro 2 converges to the solution of ``(K + alpha I) c = y``). The
        default 0 is the papers' setting: kernel interpolation (EigenPro 2) or least
        squares on the centers (EigenPro 3), regularised by the number of epochs.
    n_components : "auto" or int >= 0, default="auto"
        ``q``, the number of top eigen-directions the preconditioner flattens. "auto"
        takes the smallest ``q`` whose critical batch size ``beta / lambda_1(P)``
        reaches the batch size (the given one, or the largest that fits in
        ``working_memory``): EigenPro 2's adaptation of the kernel to the memory of
        the device. 0 is plain (unpreconditioned) minibatch kernel SGD with the same
        step-size rule. When "auto": at most ``subsample_size // 3`` (and 1000), and
        never flattening the spectrum below ``beta / subsample_size``, the smallest
        eigenvalue the Nyström points resolve (see Notes).
    subsample_size : "auto" or int >= 1, default="auto"
        ``s``, the number of Nyström points (drawn from the centers) whose kernel
        matrix is eigendecomposed (float64). "auto": all training samples up to
        2,000, then ``n_samples / 10`` within [500, 2000], and 4000 from 100,000
        training samples on; at most ``n_centers``
        (the EigenPro 2 code uses 2000 and 12,000; these keep the ``O(s^3)`` setup
        below the cost of one pass over the data, and to seconds on a CPU).
    batch_size : "auto" or int >= 1, default="auto"
        Minibatch size ``m``. "auto": ``min(m*, m_mem)``, the critical batch size
        ``m* = beta / lambda_1(P)`` capped by the largest batch whose kernel block
        ``m x (n_centers + subsample_size)`` fits in ``working_memory``
        (:func:`kernelkit.set_config`). Larger batches than fit are computed
        blockwise (bounded memory, kernel evaluated twice per step).
    eta : "auto" or float > 0, default="auto"
        Step size of a batch (a step subtracts ``eta / m`` times its residuals). "auto"
        (Ma, Bassily & Belkin 2018; EigenPro 2): ``m / beta`` for ``m <= m*`` (linear
        scaling), ``2 m / (beta + (m - 1) lambda_1(P))`` beyond (saturation), in the
        form ``m / (c beta + (m - c) mu)`` and
        ``2 m / (c beta + (m - c) (lambda_1(P) + mu))`` with ``mu = alpha / n`` and
        ``c = (n - m) / (n - 1)``: batches are drawn without replacement, which scales
        the gradient noise by ``c`` (``c = 1`` gives the papers' formulas, and
        ``c ~ 1`` whenever ``m << n``). A short last batch of an epoch gets the
        formula for its own size; a given ``eta`` is scaled to it (same step per
        point). Beyond ``m*`` the step sits at the stability limit of the top
        direction: prefer ``batch_size <= critical_batch_size_``.
    damping : float in (0, 1], default=0.95
        Exponent ``rho`` of the damped preconditioner
        ``P = I - sum_{{i<=q}} (1 - ((lambda_{{q+1}} + mu) / (lambda_i + mu)) ** rho)
        psi_i psi_i^T``, as in the EigenPro 2 implementation: ``rho < 1`` flattens the
        top of the spectrum slightly less than the Nyström estimates suggest, a
        margin against their error (``lambda_1(P) = lambda_{{q+1}}^rho
        lambda_1^(1 - rho)``). 1 is the undamped preconditioner.
    max_iter : int >= 1, default=30
        Maximum number of epochs (passes over the training data). With the default
        stopping rule typical fits stop after 3 to 20 epochs.
    tol : float >= 0 or None, default=1e-3
        Stopping tolerance. With early stopping (the default): stop when the
        validation score (R^2 / accuracy; the MSE relative to the target's mean
        square for a constant validation target, whose R^2 is 0 for every model) has
        not improved by more than ``tol`` for
        ``n_iter_no_change`` consecutive epochs. Without: stop when the relative
        change of the predictions on a fixed sample of 1,000 training points between
        consecutive epochs, ``||F_t - F_(t-1)|| / ||F_t||``, stays below ``tol`` for
        ``n_iter_no_change`` epochs (scale-free; with stochastic batches it rarely
        falls below a few percent, the noise of the steps). The training loss is no
        stopping signal: an interpolating solver keeps reducing it. None: always run
        ``max_iter`` epochs and never warn. A ``ConvergenceWarning`` is issued only
        when the rule is not met within ``max_iter`` epochs.
    early_stopping : "auto" or bool, default="auto"
        Hold out ``validation_fraction`` of the training data (stratified for the
        classifier), score it after every epoch, stop when it no longer improves and
        keep the coefficients of the best epoch (as the EigenPro papers select their
        epoch). "auto": on unless ``tol`` is None. Pass False (with ``tol=None``) to
        train on all points for exactly ``max_iter`` epochs, e.g. for the
        interpolant.
    validation_fraction : float in (0, 1), default=0.1
        Held-out fraction for early stopping.
    n_iter_no_change : int >= 1, default=2
        Epochs without improvement before stopping.
    algorithm : {{"auto", "ep2", "ep3", "ep4"}}, default="auto"
        "ep2": **EigenPro 2** (Ma & Belkin 2019), centers = training points, the
        step updates their coefficients directly (requires ``n_centers=None``).
        "ep3": **EigenPro 3** (Abedsoltan, Belkin & Pandit 2023), every step is
        projected onto the centers' span (an inner solve costing ``O(n_centers^2)``
        kernel evaluations per step). "ep4": **EigenPro 4** (Abedsoltan, Ma, Pandit
        & Belkin 2025), the projection is delayed: batches join the model as
        auxiliary centers and are projected every ``projection_period`` steps, so an
        epoch costs ``O(n n_centers)`` instead of ``O(n n_centers^2 / batch_size)``.
        "auto": "ep2" when the centers are the training points, else "ep4".
    projection_period : "auto" or int >= 1, default="auto"
        EigenPro 4 only: ``T``, steps between projections. "auto": the authors'
        default, ``n_centers // batch_size_`` (the auxiliary centers grow to as many
        points as the model has centers; ``tmp_centers_coeff=2`` in their code), halved
        from 4 up when ``k(Z, Z)`` fits in ``cache_size`` (a projection is then cheap,
        and fewer auxiliary centers make each step cheaper; halving 2 to 1 measured
        slower).
        1 is EigenPro 3. A projection also ends every epoch.
    projection_max_iter : int >= 1, default=1
        EigenPro 3 / 4: epochs of the inner EigenPro 2 solve on the centers that
        projects (the EigenPro 3 code runs up to 2, EigenPro 4's one). Larger is a
        more exact projection at ``O(n_centers^2)`` kernel evaluations per epoch each.
    cache_size : "auto" or float >= 0, default="auto"
        MiB for kernel blocks kept for the whole fit: ``k(X, centers)`` (EigenPro 2:
        the ``n x n`` kernel matrix) is computed once and reused every epoch when it
        fits, then ``k(centers, centers)`` for the projection; the iterates are
        those of recomputing. "auto": half the memory available when ``fit``
        starts, at most 4096. 0 disables the cache (local runs only; never with
        ``client``).
    dtype : {{"float32", "float64"}}, default="float32"
        Precision of the iteration (kernel blocks, iterates, products): float32, as
        in the papers, halves the memory of the kernel blocks. It never rounds the
        data: inputs and centers keep their own precision, kernel values are computed
        in float64 from them and rounded (so ``X + 1e6`` or ``X * 1e-50`` with the
        matching ``gamma`` give the fit on ``X``); the eigendecomposition is float64,
        and so are the coefficients (their scale is the targets').
    client : None, str or distributed.Client, default=None
        Run the kernel products against the centers on a Dask cluster
        (:mod:`kernelkit.distributed`): the centers are scattered over the workers
        once, each step's kernel block is computed where its centers live. A string
        is a scheduler address (``client.scheduler.address``); pass a string rather
        than a ``Client`` object to clone or pickle the estimator (``GridSearchCV``).
        Used by ``fit`` and ``predict``.
    backend : {{"auto", "numpy", "numba", "cupy"}} or None, default=None
        Compute engine; None follows :func:`kernelkit.set_config`. Resolved in ``fit``
        into ``backend_``.
    random_state : int, RandomState instance or None, default=None
        Seeds the centers (int ``n_centers``), the Nyström subsample, the batches and
        the validation split. Pass an int for reproducible results.
    verbose : int, default=0
        1: one line per epoch (training loss, validation score or prediction change,
        seconds) through :class:`kernelkit.utils._verbose.Progress`."""

_ATTRS_DOC = """
    centers_ : ndarray of shape (n_centers, n_features), float64 (float32 if given)
        The centers (a copy: the training data for EigenPro 2), at the precision of
        the inputs.
    dual_coef_ : ndarray of shape (n_centers,) or (n_centers, n_outputs), float64
        Coefficients of the kernel functions of the centers.
    n_components_ : int
        ``q`` used.
    subsample_size_ : int
        ``s`` used.
    batch_size_ : int
        ``m`` used.
    eta_ : float
        Step size used; a step subtracts ``eta_ / m`` times the batch's residuals.
    beta_ : float
        ``max_i k(x_i, x_i)`` over the training data (measured; not 1 for the NTK).
    eigenvalues_ : ndarray of shape (`n_components_` + 1,)
        Nyström estimates ``lambda_1 >= ... >= lambda_{q+1}`` of the top eigenvalues of
        the kernel covariance operator (the kernel matrix divided by ``n``).
    top_eigenvalue_ : float
        ``lambda_1(P)``, top eigenvalue of the preconditioned operator: the larger of
        the Nyström value ``(lambda_{q+1} + mu)^rho (lambda_1 + mu)^(1 - rho)`` and the
        value measured on a fresh sample of ``subsample_size`` training points (the
        Nyström points capture the top eigen-directions only in part; what they miss
        keeps its large eigenvalue and would make the step overshoot).
    critical_batch_size_ : float
        ``m*``: ``(beta_ + alpha) / top_eigenvalue_`` for ``n >> m*``; exactly
        ``n b / ((n - 1) top_eigenvalue_ + b)`` with ``b = beta_ + alpha`` (the batch
        at which the linear-scaling step reaches the stability limit, for batches
        drawn without replacement).
    algorithm_ : {"ep2", "ep3", "ep4"}
        The iteration used.
    projection_period_ : int or None
        Steps between projections (1 for EigenPro 3, None for EigenPro 2).
    n_auxiliary_centers_ : int or None
        EigenPro 4: the most auxiliary centers held between projections,
        ``projection_period_ * batch_size_``.
    n_projections_ : int or None
        EigenPro 4: projections performed.
    kernel_cached_ : bool
        Whether ``k(X, centers)`` was kept for the whole fit (``cache_size``).
    projection_n_components_, projection_batch_size_, projection_eta_ : int, int, float
        The same, chosen automatically, for the inner projection solve on the
        centers (None for EigenPro 2). The inner step is half the EigenPro 2 formula,
        as in the EigenPro 3 code: the inexact projection then never exceeds the exact
        one along any direction, so it cannot enlarge the outer step.
    loss_curve_ : list of float
        Per epoch, the mean over its batches of the squared error (averaged over
        outputs) measured before each step.
    validation_scores_ : list of float or None
        Per epoch, the validation score (early stopping only): accuracy for the
        classifier; for the regressor R^2 averaged over outputs, an output whose
        validation targets are constant scored as ``1 - MSE / mean(y^2)``.
    best_validation_score_ : float or None
        Best validation score (early stopping only).
    prediction_changes_ : list of float or None
        Without early stopping: per epoch, the relative change of the predictions
        on the monitored training sample (inf for the first).
    n_iter_ : int
        Epochs run.
    backend_ : str
        The engine used.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names."""

_NOTES_DOC = """
    **Algorithm.** Notation of the papers: ``K`` is the kernel covariance operator
    (the kernel matrix over ``n``), with Nyström estimates ``(lambda_i, psi_i)`` of
    its top eigenpairs from ``s`` points; ``beta = max_i k(x_i, x_i)``. A step on a
    batch ``B`` of size ``m`` with residuals ``r = f(X_B) - y_B`` moves ``f`` by
    ``-eta P g`` with ``g = 1/m sum_{{i in B}} r_i k(., x_i)`` (+ ``alpha/n f``) and
    the damped preconditioner ``P`` above (Ma & Belkin 2017, 2019). EigenPro 2
    applies it to the coefficients of the batch and of the Nyström points
    directly. EigenPro 3 evaluates ``h = (P g)(Z)`` on the centers and solves
    ``K(Z, Z) theta = h`` approximately by ``projection_max_iter`` epochs of
    EigenPro 2 on the centers (their own preconditioner, batch and step size),
    then sets ``dual_coef_ -= eta theta`` (Abedsoltan, Belkin & Pandit 2023,
    Algorithm 1 and the inexact projection). The Nyström points are drawn from
    the centers, so the correction lies in their span and the projection commutes
    with ``P``: the fixed point is the minimiser of the loss over the centers' span
    (for user-given centers the eigenproblem is the generalised one of the data
    operator restricted to that span, on a data sample of the same size). With
    ``alpha > 0`` the ridge gradient ``alpha/n f`` is projected along with the data
    gradient (the inner solve starts from ``-alpha/n dual_coef_``), so the fixed
    point is exactly ``argmin ||K(X, Z) a - y||^2 + alpha a^T K(Z, Z) a``.
    EigenPro 4 runs the same step as an exact functional update: the batch joins
    the model as auxiliary centers with ``-eta r / m``, the correction stays on the
    Nyström points, and their values on the centers accumulate in ``h``; every
    ``projection_period_`` steps ``dual_coef_ += K(Z, Z)^-1 h`` (the same inner
    solve; the ridge decay of ``dual_coef_`` goes through it, so the fixed point is
    the same) and the auxiliary centers are dropped. With one step per period it is
    EigenPro 3 (Abedsoltan, Ma, Pandit & Belkin 2025, Algorithm EigenPro 4).

    **Scale and degenerate data.** The iteration runs on each output divided by its
    RMS and the float64 coefficients are scaled back, so ``y`` and ``c y`` give the
    same model up to rounding for any ``c`` float64 holds (1e-300 to 1e300, in
    float32 as well), and an output of scale 1e-300 beside one of scale 1 is fitted
    as it would be alone. When the kernel has
    numerical rank ``n_components_ + 1`` (e.g. identical rows: rank one), the
    preconditioned spectrum is flat: the batch is the largest that fits and the step
    the one optimal for that single level (the saturation formula would sit on the
    stability limit and oscillate); identical rows then give the mean of ``y``.

    **Automatic values.** ``n_components`` is the smallest ``q`` whose critical
    batch reaches the target batch (the memory-bound batch, at most
    ``subsample_size`` and half the points), never flattening below the Nyström
    resolution ``beta / subsample_size``; then ``batch_size = min(m*, memory
    bound)`` and ``eta`` from the formula, so the default run stays in the
    linear-scaling regime, a factor 2 inside the stability limit.

    **Memory.** The ``n x n_centers`` kernel matrix is formed only when it fits
    ``cache_size`` (then once per fit); otherwise a step holds one
    ``batch_size x n_centers`` block (sized to ``working_memory``; EigenPro 3 / 4
    also keep ``k(Z_J, Z)``, ``s x n_centers``, when it fits there; EigenPro 4 the
    auxiliary centers, ``n_auxiliary_centers_ x (d + outputs)``) and the setup
    three ``s x s`` float64 matrices (the Nyström kernel matrix and the blocks that
    measure ``lambda_1(P)``); the rest is ``O((n + n_centers + s) d)``: the training
    data (at its own precision), the centers and the coefficients.

    **Divergence** (loss becoming non-finite or exploding, e.g. for a too-large
    ``eta``) raises a ``ValueError`` naming the step size; NaN predictions are
    never returned.

    References: A. Abedsoltan, S. Ma, P. Pandit and M. Belkin, "Fast training of
    large kernel models with delayed projections", NeurIPS 2025 (arXiv 2411.16658);
    S. Ma and M. Belkin, "Kernel machines that adapt to GPUs for
    effective large batch training", MLSys 2019; A. Abedsoltan, M. Belkin and P.
    Pandit, "Toward large kernel models", ICML 2023; S. Ma and M. Belkin, "Diving
    into the shallows", NeurIPS 2017; S. Ma, R. Bassily and M. Belkin, "The power of
    interpolation", ICML 2018."""
