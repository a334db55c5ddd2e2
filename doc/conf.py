"""Sphinx configuration for the kernelkit documentation.

Build from the repository root (needs the ``doc`` extra:
``pip install -e ".[doc]"``)::

    sphinx-build -b html doc doc/_build/html

or ``make -C doc html``. The example gallery in ``examples/`` is executed
during the build and rendered into ``doc/auto_examples/``; set
``KERNELKIT_DOC_NO_GALLERY=1`` to skip running it. Links to the NumPy,
SciPy, scikit-learn and Python documentation (intersphinx) need network
access: an inventory whose host cannot be reached is left out (the build stays
warning-free offline, without those links); ``KERNELKIT_DOC_OFFLINE=1`` skips
the check and all of them.
"""

import os
import sys
from datetime import date

# Prefer the installed package; fall back to the source tree next to this folder.
try:
    import kernelkit
except ImportError:  # pragma: no cover - only when kernelkit is not installed
    sys.path.insert(0, os.path.abspath(".."))
    import kernelkit

# -- Project information ---------------------------------------------------------
project = "kernelkit"
author = "kernelkit developers"
copyright = f"{date.today().year}, {author}"
release = kernelkit.__version__  # full version, e.g. "0.1.0.dev0"
version = ".".join(release.split(".")[:2])  # short X.Y version

# -- General configuration -------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip"]
root_doc = "index"
default_role = "literal"  # `x` renders as code
nitpicky = False

# autodoc / autosummary: stub pages for every name listed in api.rst go to generated/.
autosummary_generate = True
# Inherited members are shown (e.g. the classifiers' fit/predict come from a private
# mixin), except scikit-learn's generic estimator API (get_params, set_params, score,
# set_*_request), whose docstrings refer to scikit-learn's own documentation.
autodoc_default_options = {
    "members": True,
    # scikit-learn's own set_output docstring links to labels of scikit-learn's docs
    "exclude-members": "set_output",
    "inherited-members": "BaseEstimator,_MetadataRequester,RegressorMixin,ClassifierMixin,"
                         "MultiOutputMixin",
}
autodoc_typehints = "none"

# numpydoc: parameter tables from the numpy-style docstrings; class members are
# listed by the autosummary class template instead.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

_INVENTORIES = {
    "python": "https://docs.python.org/3",
    "numpy": "https://numpy.org/doc/stable/",
    "scipy": "https://docs.scipy.org/doc/scipy/",
    "sklearn": "https://scikit-learn.org/stable/",
    "matplotlib": "https://matplotlib.org/stable/",
}


def _reachable(url, timeout=2.0):
    """Whether the inventory's host accepts a connection (no network: False, fast)."""
    import socket
    from urllib.parse import urlparse

    try:
        socket.create_connection((urlparse(url).hostname, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


intersphinx_mapping = {}
if os.environ.get("KERNELKIT_DOC_OFFLINE") != "1":
    intersphinx_mapping = {k: (u, None) for k, u in _INVENTORIES.items() if _reachable(u)}
if intersphinx_mapping:
    extensions.append("sphinx.ext.intersphinx")

# -- Example gallery (sphinx-gallery) --------------------------------------------
_NO_GALLERY = os.environ.get("KERNELKIT_DOC_NO_GALLERY") == "1"
# The user-guide pages show figures made by the gallery; without it they are absent.
# Only then is that one warning silenced (a missing image is an error otherwise).
suppress_warnings = ["image.not_readable"] if _NO_GALLERY else []
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",  # execute every plot_*.py script
    "plot_gallery": "False" if _NO_GALLERY else "True",
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("kernelkit",),
    "backreferences_dir": os.path.join("generated", "backreferences"),
    "remove_config_comments": True,
    "matplotlib_animations": False,
}

# -- HTML output -----------------------------------------------------------------
html_theme = "alabaster"
html_title = f"kernelkit {release}"
html_static_path = []
html_theme_options = {
    "description": "Scikit-learn compatible kernel machines that scale",
    "fixed_sidebar": True,
}


# -- Hooks -----------------------------------------------------------------------
def _skip_sklearn_routing(app, what, name, obj, skip, options):
    """Hide scikit-learn's metadata-routing methods (set_fit_request, ...), and its
    generic methods (``score``) that kernelkit's array-API wrapper re-attaches.

    scikit-learn attaches the routing methods to every estimator subclass, and the
    wrapper (results follow the input) sets ``score`` on each estimator class, so they
    are the class's own members and the ``inherited-members`` filter does not catch them.
    """
    if what == "class" and (name == "get_metadata_routing"
                            or (name.startswith("set_") and name.endswith("_request"))):
        return True
    wrapped = getattr(obj, "__wrapped__", None)
    if what == "class" and getattr(obj, "_kernelkit_follows", False) and \
            getattr(wrapped, "__module__", "").startswith("sklearn."):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_routing)
