"""STKR-Prop: the STKR solutions through products with the base kernel matrix only.

Notation (Zhai et al., ICLR 2024, Sec. 4). ``G`` is the base kernel matrix of all
``N = n + m`` training points, ``lam1`` its largest eigenvalue and ``A = G / lam1``
(eigenvalues in ``[0, 1]``); ``L`` the ``n`` labeled rows, ``E`` the embedding of
``R^n`` into ``R^N`` by zero-filling the unlabeled rows, ``D = E E^T``. The
transformed kernel matrix is ``G_s = lam1 s(A) = G s~(A)`` with ``s~(mu) = s(mu) / mu``,
and STKR is kernel ridge with it on the labeled rows::

    (G_s[L, L] + n beta I) alpha = y,   theta = s~(A) E alpha,   f(x) = k(x, X) theta

so that ``f`` at a new point needs only kernel evaluations ``k(x, X)`` (the inductive
predictor of the paper's Sec. 4). Nothing here forms ``s(A)`` or an inverse.

* Polynomial ``s(mu) = sum_p pi_p mu^p`` (Algorithm 1, STKR-Prop): ``G_s E alpha`` by
  Horner's rule, ``q`` products with ``G`` per step; the system in ``alpha`` is
  symmetric positive definite, solved by conjugate gradients (``solver="cg"``) or by
  the paper's Richardson iteration (``solver="richardson"``).
* Inverse Laplacian ``s(mu)^-1 = mu^-1 - eta`` (Algorithm 2): with
  ``Q = I - eta A``, ``theta = Q^-1 E alpha`` solves the single system
  ``T theta = E y``, ``T = D G + n beta Q`` (its labeled rows are the ridge equations,
  its unlabeled rows ``(Q theta)_U = 0``), one product with ``G`` per step. ``T`` is
  not symmetric but ``G T = G D G + n beta G Q`` is: ``T`` is self-adjoint and positive
  in the ``G`` inner product, where conjugate gradients apply with one product per
  step (the products ``G r`` and ``G p`` follow by recurrence); Richardson iterates on
  ``T`` directly. Both stop on the ``G``-norm of the residual, the norm in which the
  predictions ``G theta`` converge (directions ``G`` does not see do not change ``f``).
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..utils._dispatch import select_loops


class _Monitor:
    """Relative residuals, progress lines and the convergence warning of one solve."""

    def __init__(self, progress, name, tol, max_iter):
        self.progress, self.name = progress, name
        self.tol, self.max_iter = tol, max_iter
        self.history = []

    def done(self, k, res):
        res = float(np.max(res))
        self.history.append(res)
        self.progress(self.name, k, self.max_iter, level=2, residual=res)
        return res <= self.tol

    def finish(self, converged):
        if not converged:
            warnings.warn(
                f"STKR-Prop ({self.name}): max_iter={self.max_iter} was reached without "
                f"convergence (relative residual {self.history[-1]:.3g} > tol={self.tol:g}); "
                "increase max_iter, use solver='cg', or increase beta.",
                ConvergenceWarning, stacklevel=4)
        return len(self.history) - 1


def _cg(apply, b, tol, max_iter, monitor):
    """Conjugate gradients on the SPD ``apply``, columnwise, from zero."""
    x = np.zeros_like(b)
    r, p = b.copy(), b.copy()
    bnorm = np.maximum(np.linalg.norm(b, axis=0), np.finfo(float).tiny)
    rs = np.sum(r * r, axis=0)
    converged = monitor.done(0, np.sqrt(rs) / bnorm)
    k = 0
    while not converged and k < max_iter:
        k += 1
        Ap = apply(p)
        pAp = np.sum(p * Ap, axis=0)
        a = np.divide(rs, pAp, out=np.zeros_like(rs), where=pAp > 0)
        x += a * p
        r -= a * Ap
        rs_new = np.sum(r * r, axis=0)
        converged = monitor.done(k, np.sqrt(rs_new) / bnorm)
        p = r + np.divide(rs_new, rs, out=np.zeros_like(rs), where=rs > 0) * p
        rs = rs_new
    return x, converged


def _richardson(apply, b, step, tol, max_iter, monitor):
    """``x <- x + step (b - apply(x))`` from zero (the paper's iteration)."""
    x = np.zeros_like(b)
    bnorm = np.maximum(np.linalg.norm(b, axis=0), np.finfo(float).tiny)
    r = b.copy()
    converged = monitor.done(0, np.ones(b.shape[1]))
    k = 0
    while not converged and k < max_iter:
        k += 1
        x += step * r
        r = b - apply(x)
        converged = monitor.done(k, np.linalg.norm(r, axis=0) / bnorm)
    return x, converged


def _horner(G, lam1, coefs, V):
    """``s~(A) V`` for ``s~(mu) = sum_p coefs[p-1] mu^(p-1)`` (``q - 1`` products)."""
    u = coefs[-1] * V
    for c in coefs[-2::-1]:
        u = G(u) / lam1 + c * V
    return u


def solve_polynomial(G, lam1, coefs, labeled, Y, ridge, *, solver, tol, max_iter, monitor,
                     weights=None):
    """STKR-Prop for ``s(mu) = sum_p coefs[p-1] mu^p`` (coefficients >= 0).

    Parameters
    ----------
    G : GramOperator
    lam1 : float
        Largest eigenvalue of ``G``.
    coefs : ndarray of shape (q,)
    labeled : ndarray of int, shape (n,)
    Y : ndarray of shape (n, n_targets)
    ridge : float
        ``n * beta``.
    weights : ndarray of shape (n,) or None
        Row weights ``w >= 0`` of the squared loss: the system becomes
        ``(G_s[L, L] + ridge W^-1) alpha = y``, solved in its symmetric form
        ``(W^1/2 G_s[L, L] W^1/2 + ridge I) u = W^1/2 y``, ``alpha = W^1/2 u`` (a zero
        weight gives a zero coefficient, no division).
    solver : {"cg", "richardson"}
    tol : float
        Relative residual ``||M alpha - y|| / ||y||`` to stop at.
    max_iter : int
    monitor : _Monitor

    Returns
    -------
    theta : ndarray of shape (N, n_targets)
        Coefficients of the inductive predictor ``f(x) = k(x, X) theta``.
    fitted : ndarray of shape (N, n_targets)
        ``G theta``: the predictions at every training point.
    n_iter : int
    """
    N = G.n

    def embed(V):
        out = np.zeros((N, V.shape[1]))
        out[labeled] = V
        return out

    sq = np.ones((len(labeled), 1)) if weights is None else np.sqrt(weights)[:, None]

    def apply(V):  # (W^1/2 G_s[L, L] W^1/2 + ridge I) V: q products with G
        return sq * G(_horner(G, lam1, coefs, embed(sq * V)))[labeled] + ridge * V

    if solver == "cg":
        u, ok = _cg(apply, sq * Y, tol, max_iter, monitor)
    else:
        # eigenvalues of G_s[L, L] lie in [0, s(1) lambda_max(G[L, L])] (A^p <= A on [0, 1])
        top = float(np.sum(coefs)) * _top_labeled(G, labeled) * float(np.max(sq)) ** 2
        u, ok = _richardson(apply, sq * Y, 2.0 / (top + 2.0 * ridge), tol, max_iter, monitor)
    n_iter = monitor.finish(ok)
    theta = _horner(G, lam1, coefs, embed(sq * u))
    return theta, G(theta), n_iter


def solve_inverse_laplacian(G, lam1, eta, labeled, Y, ridge, *, solver, tol, max_iter,
                            monitor, weights=None):
    """STKR-Prop for the inverse Laplacian ``s(mu) = mu / (1 - eta mu)``, ``0 <= eta < 1``.

    Parameters and returns as :func:`solve_polynomial`; the residual is measured in
    the ``G`` norm, ``||E y - T theta||_G / ||E y||_G``. Row weights multiply the
    labeled equations: ``T = D_w G + n beta Q``, right-hand side ``E W y`` (``G T``
    stays symmetric, so CG applies unchanged).
    """
    return solve_inverse_laplacian_many(G, lam1, eta, [(labeled, Y, ridge, weights, monitor)],
                                        solver=solver, tol=tol, max_iter=max_iter)[0]


def solve_inverse_laplacian_many(G, lam1, eta, problems, *, solver, tol, max_iter,
                                 engine="numpy"):
    """:func:`solve_inverse_laplacian` for several problems on one ``G`` at once.

    ``problems`` holds ``(labeled, Y, ridge, weights, monitor)`` tuples (the
    calibration's fold refits beside the fit). Their columns share each product with
    ``G`` (one sparse pass serves them all); each column's iteration is its own, and a
    problem's columns leave the batch when its monitor reports convergence, so each
    problem gets the iterates (to rounding), stopping step and history it would get alone.
    ``engine`` picks the loops of CG's vector passes (:func:`._loops.cg_direction`,
    :func:`._loops.cg_update`: NumPy, or a compiled twin that makes each a single pass).

    Returns
    -------
    list of ``(theta, fitted, n_iter)``, one per problem.
    """
    N = G.n
    group = np.repeat(np.arange(len(problems)), [p[1].shape[1] for p in problems])
    d, b = np.zeros((N, group.size)), np.zeros((N, group.size))
    ridge, step = np.empty(group.size), np.empty(group.size)
    for g, (labeled, Y, rdg, weights, _) in enumerate(problems):
        cols = np.flatnonzero(group == g)
        w = np.ones(len(labeled)) if weights is None else np.asarray(weights, np.float64)
        d[np.ix_(labeled, cols)] = w[:, None]
        b[np.ix_(labeled, cols)] = w[:, None] * Y
        ridge[cols] = rdg
        if solver != "cg":
            # G-Rayleigh quotients of T lie in [ridge (1 - eta), lambda_max(G[L, L]) + ridge]
            step[cols] = 2.0 / (_top_labeled(G, labeled) * float(np.max(w)) + rdg * (2.0 - eta))
    c = eta / lam1
    Gb = G(b)
    bnorm = np.sqrt(np.maximum(np.sum(b * Gb, axis=0), np.finfo(float).tiny))
    out = np.zeros_like(b)
    n_iter = np.zeros(len(problems), dtype=int)
    # the active columns' state; a finished problem's columns are dropped from all of it
    act = np.arange(group.size)
    theta, r, Gr = np.zeros_like(b), b.copy(), Gb.copy()
    rho = np.sum(r * Gr, axis=0)
    st = dict(theta=theta, r=r, Gr=Gr, rho=rho, bnorm=bnorm, d=d, ridge=ridge, step=step)
    if solver == "cg":
        # the first direction is r: p = 0 p + r (beta = 0)
        st.update(p=np.zeros_like(b), Gp=np.zeros_like(b), Tp=np.empty_like(b),
                  beta=np.zeros(group.size))
    loops = select_loops(__package__, engine)

    def finished(k, res):
        """Report each active problem's residual; drop the columns of those done."""
        nonlocal act
        stop = np.zeros(act.size, dtype=bool)
        for g in np.unique(group[act]):
            m = group[act] == g
            if problems[g][4].done(k, res[m]) or k >= max_iter:
                stop |= m
                n_iter[g] = problems[g][4].finish(problems[g][4].history[-1] <= tol)
        if stop.any():
            out[:, act[stop]] = st["theta"][:, stop]
            for key, v in st.items():
                st[key] = np.ascontiguousarray(v[..., ~stop])
            act = act[~stop]
        return act.size == 0

    k = 0
    done = finished(0, np.sqrt(np.maximum(rho, 0)) / bnorm)
    while not done:
        k += 1
        if solver == "cg":  # CG in the G inner product: one product per step
            # p <- r + beta p (and G p by the same recurrence), T p given G p: no product
            pTp = loops.cg_direction(st["p"], st["Gp"], st["r"], st["Gr"], st["beta"], c,
                                     st["ridge"], st["d"], st["Tp"])
            a = np.divide(st["rho"], pTp, out=np.zeros_like(pTp), where=pTp > 0)
            GTp = G(st["Tp"])
            rho_new = loops.cg_update(a, st["p"], st["Tp"], GTp, st["theta"], st["r"],
                                      st["Gr"])
            st["beta"] = np.divide(rho_new, st["rho"], out=np.zeros_like(pTp),
                                   where=st["rho"] > 0)
            st["rho"] = rho_new
            res = rho_new
        else:
            st["theta"] += st["step"] * st["r"]
            T = st["d"] * st["Gr"] + st["ridge"] * (st["r"] - c * st["Gr"])
            st["r"] -= st["step"] * T
            st["Gr"] = G(st["r"])
            res = np.sum(st["r"] * st["Gr"], 0)
        done = finished(k, np.sqrt(np.maximum(res, 0)) / st["bnorm"])
    fitted = G(out)
    return [(out[:, group == g], fitted[:, group == g], int(n_iter[g]))
            for g in range(len(problems))]


def _top_labeled(G, labeled):
    block = G.block(labeled)
    return float(np.linalg.eigvalsh(block)[-1]) if block.size else 0.0


def kpca_basis(G, n_components, random_state):
    """``(sigma, U)``: the top eigenpairs of ``G`` above ``1e-10 sigma_1`` (see
    :func:`solve_kpca`), computed once per fit."""
    sigma, U = G.eigh(n_components, random_state)
    keep = sigma > 1e-10 * max(float(sigma[0]), 0.0)
    if not np.all(keep):
        warnings.warn(f"n_components={n_components} exceeds the numerical rank of the "
                      f"kernel matrix; using the top {int(keep.sum())} eigenfunctions.",
                      RuntimeWarning, stacklevel=4)
        sigma, U = sigma[keep], U[:, keep]
    if sigma.size == 0:
        raise ValueError("the kernel matrix is numerically zero: no kernel-PCA component.")
    return sigma, U


def solve_kpca(basis, labeled, Y, ridge, weights=None):
    """Ridge on the top ``n_components`` kernel-PCA eigenfunctions of all points.

    The empirical eigenfunctions, normalised in ``L2`` of the empirical distribution,
    are ``psi_i(x) = sqrt(N) k(x, X) u_i / sigma_i`` for the eigenpairs
    ``(sigma_i, u_i)`` of ``G`` (so ``psi_i(x_j) = sqrt(N) u_ij``); the ridge
    ``w = (Psi_L^T Psi_L + n beta I)^-1 Psi_L^T y`` gives ``theta = U diag(sqrt(N) /
    sigma) w``. Eigenvalues below ``1e-10 sigma_1`` are dropped with a warning
    (:func:`kpca_basis` gives ``basis``). Row weights: ``Psi_L^T W Psi_L`` and
    ``Psi_L^T W y``.

    Returns
    -------
    theta, fitted : ndarray of shape (N, n_targets)
    n_kept : int
        Number of eigenfunctions used.
    """
    sigma, U = basis
    N = U.shape[0]
    Psi = np.sqrt(N) * U
    PL = Psi[labeled]
    PW = PL.T if weights is None else PL.T * weights
    w = np.linalg.solve(PW @ PL + ridge * np.eye(PL.shape[1]), PW @ Y)
    theta = U @ (np.sqrt(N) / sigma[:, None] * w)
    return theta, Psi @ w, sigma.size
