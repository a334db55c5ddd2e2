"""
=====================================================
Second-order online kernel learning on a digit stream
=====================================================

The 1,797 handwritten digits of scikit-learn arrive one at a time. Each model
predicts the label of the next image, is told the truth, and learns from it
(prequential evaluation). We count the cumulative mistakes of

* exact KONS (every image is an atom: the second-order reference, ``O(t^2)``);
* Sketched-KONS (atoms sampled online by their ridge leverage scores, KORS);
* PROS-N-KONS (the same dictionary, restarting at each new atom);
* ``SGDClassifier`` on 500 random Fourier features (first order).

Exact KONS and Sketched-KONS make far fewer mistakes than SGD from the start, and
Sketched-KONS stays close to exact KONS while storing a sixth of the images.
PROS-N-KONS forgets everything at each new atom: it pays for every restart while
its dictionary grows (here until the 300-atom cap), then its slope matches the
others'.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import SGDClassifier

from kernelkit.online import KONSClassifier

X, y = load_digits(return_X_y=True)
X = X / 16.0
classes = np.unique(y)
common = dict(loss="squared", gamma=0.05, alpha=0.1, gamma_reg=0.3, random_state=0)

curves = {}
for method in ("kons", "sketched", "pros-n-kons"):
    # the sketched variants keep at most 300 atoms; exact KONS keeps every image
    cap = None if method == "kons" else 300
    clf = KONSClassifier(method=method, max_atoms=cap, **common)
    mistakes = clf.partial_fit_predict(X, y, classes=classes) != y
    curves[f"{method} ({clf.n_atoms_} atoms)"] = np.cumsum(mistakes)

# first-order peer: predict, then learn, one sample at a time
Z = RBFSampler(n_components=500, gamma=0.05, random_state=0).fit_transform(X)
sgd = SGDClassifier(alpha=1e-4, random_state=0)
sgd.partial_fit(Z[:1], y[:1], classes=classes)
pred = [classes[0]]
for t in range(1, len(y)):
    pred.append(sgd.predict(Z[t:t + 1])[0])
    sgd.partial_fit(Z[t:t + 1], y[t:t + 1])
curves["SGD on 500 random features"] = np.cumsum(np.array(pred) != y)

fig, ax = plt.subplots(figsize=(7, 4.5))
for label, c in curves.items():
    ax.plot(np.arange(1, len(y) + 1), c, label=f"{label}: {c[-1]} mistakes")
ax.set_xlabel("samples seen")
ax.set_ylabel("cumulative mistakes")
ax.set_title("Prequential mistakes on the digits stream")
ax.legend()
fig.tight_layout()
plt.show()
