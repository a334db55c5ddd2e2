"""The demo: kernelkit's kernel ridge models against scikit-learn baselines on bundled data."""

import time

from sklearn.base import clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from .ridge import KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier
from .utils._threads import single_blas_thread

ALPHAS = [0.01, 0.1, 1.0, 10.0]
GAMMAS = [0.3, 1.0, 3.0]  # multiples of 1 / n_features (features are standardised)


def _models(task, n_features):
    """(name, estimator, grid) triples; every model sees standardised features."""
    gammas = [g / n_features for g in GAMMAS]
    if task == "classification":
        specs = [
            ("kernelkit NTKRidgeClassifier", NTKRidgeClassifier(),
             {"depth": [1, 2, 3], "alpha": ALPHAS}),
            ("kernelkit KernelRidgeClassifier (rbf)", KernelRidgeClassifier(kernel="rbf"),
             {"gamma": gammas, "alpha": ALPHAS}),
            ("sklearn SVC (rbf)", SVC(), {"gamma": gammas, "C": [1.0, 10.0, 100.0]}),
            ("sklearn RandomForestClassifier", RandomForestClassifier(n_estimators=200,
                                                                      random_state=0), None),
        ]
    else:
        specs = [
            ("kernelkit NTKRidge", NTKRidge(), {"depth": [1, 2, 3], "alpha": ALPHAS}),
            ("kernelkit KernelRidge (rbf)", KernelRidge(kernel="rbf"),
             {"gamma": gammas, "alpha": ALPHAS}),
            ("sklearn KernelRidge (rbf)", SkKernelRidge(kernel="rbf"),
             {"gamma": gammas, "alpha": ALPHAS}),
            ("sklearn RandomForestRegressor", RandomForestRegressor(n_estimators=200,
                                                                    random_state=0), None),
        ]
    for name, est, grid in specs:
        if grid is not None:
            est = GridSearchCV(est, grid, cv=3)
        est = make_pipeline(StandardScaler(), est)
        if task == "regression":
            est = TransformedTargetRegressor(est, transformer=StandardScaler())
        yield name, est


DATASETS = {
    "digits": (load_digits, "classification"),
    "breast_cancer": (load_breast_cancer, "classification"),
    "diabetes": (load_diabetes, "regression"),
}


WARMUP_ROWS = 90  # enough for every grid's 3-fold split (digits: 9 rows per class)


def _warm_up(est, X, y, task):
    """Fit a clone on a small slice: Numba compiles kernelkit's loops on their first call
    (seconds), which would otherwise be counted in the first fit timed on each data set."""
    X_s, _, y_s, _ = train_test_split(X, y, train_size=WARMUP_ROWS, random_state=0,
                                      stratify=y if task == "classification" else None)
    t0 = time.perf_counter()
    clone(est).fit(X_s, y_s)
    return time.perf_counter() - t0


def run_demo(datasets=None, out=print):
    """Fit every model on every dataset and print one table.

    Each model is first fitted once on a small slice of the training rows (its
    first-call time, mostly Numba compilation for kernelkit's models, is reported
    apart), then timed on the full training set, so fit times are warm times.

    Parameters
    ----------
    datasets : list of str, default=None
        Names in :data:`DATASETS`; None means all.
    out : callable, default=print
        Receives each line of the table.

    Returns
    -------
    rows : list of dict
        ``dataset``, ``model``, ``metric``, ``test_score``, ``fit_time_s`` (warm) and
        ``warmup_s`` (the small-slice first fit, compilation included) per fit.
    """
    rows = []
    out("Every model fits with BLAS on one thread, so that fit times compare like for like "
        "on a shared machine (two BLAS threads stall badly when a core is busy). Fit times are "
        f"warm: each model is first fitted on {WARMUP_ROWS} rows, whose time (Numba compiling "
        "kernelkit's loops on their first call) is the warm-up column.")
    header = (f"{'dataset':<14} {'model':<40} {'metric':<9} {'test score':>10} "
              f"{'fit time (s)':>13} {'warm-up (s)':>12}")
    out(header)
    out("-" * len(header))
    for name in datasets or list(DATASETS):
        loader, task = DATASETS[name]
        X, y = loader(return_X_y=True)
        X_tr, X_te, y_tr, y_te = train_test_split(
            X, y, test_size=0.25, random_state=0, stratify=y if task == "classification" else None)
        metric = "accuracy" if task == "classification" else "R^2"
        for model_name, est in _models(task, X.shape[1]):
            with single_blas_thread():
                warmup = _warm_up(est, X_tr, y_tr, task)
                t0 = time.perf_counter()
                est.fit(X_tr, y_tr)
                fit_time = time.perf_counter() - t0
                score = float(est.score(X_te, y_te))
            rows.append({"dataset": name, "model": model_name, "metric": metric,
                         "test_score": score, "fit_time_s": fit_time, "warmup_s": warmup})
            out(f"{name:<14} {model_name:<40} {metric:<9} {score:>10.4f} {fit_time:>13.2f} "
                f"{warmup:>12.2f}")
    return rows


__all__ = ["run_demo", "DATASETS"]
