"""The layer vocabulary of the convolutional kernels, compiled to a small program.

A network is given as a short list of layers (see :class:`~kernelkit.kernels.ConvNTK`);
:func:`compile_layers` checks it against the image shape and turns it into an integer
table that the NumPy reference and the Numba engine both execute.
"""

from numbers import Integral

import numpy as np

# op codes of the program rows
CONV, RELU, ERF, POOL = 0, 1, 2, 3
READOUTS = ("flatten", "gap")
PADDINGS = ("same", "valid")
# program row: code, filter or window, pad_before, h_in, w_in, h_out, w_out, traj_offset
N_FIELDS = 8

_MYRTLE = {5: (2, 1, 1), 7: (2, 2, 2), 10: (3, 3, 3)}


def myrtle_layers(depth=5):
    """The Myrtle architectures of Shankar et al. (ICML 2020) as a ``layers`` list.

    Myrtle-``depth`` is ``[conv 3x3, relu] * a``, a 2x2 average pool,
    ``[conv 3x3, relu] * b``, a 2x2 average pool, ``[conv 3x3, relu] * c`` and a
    global average pool, with ``(a, b, c) = (2, 1, 1)``, ``(2, 2, 2)``, ``(3, 3, 3)``
    for depth 5, 7, 10 (the dense read-out is the last layer). On the paper's 32x32
    images the global average pool of the 8x8 map is exactly its three further 2x2
    pools and flatten; on other sizes (sides multiples of 4) it is the same network
    with the last pools adapted to the map. The paper uses ``w_std = sqrt(2)``,
    ``b_std = 0`` and "same" padding.

    Parameters
    ----------
    depth : {5, 7, 10}, default=5

    Returns
    -------
    layers : tuple
        The ``layers`` parameter of :class:`ConvNTK` / :class:`ConvNNGP`.

    Raises
    ------
    ValueError
        For another depth.

    References
    ----------
    Shankar, Fang, Guo, Fridovich-Keil, Schmidt, Ragan-Kelley and Recht, "Neural
    kernels without tangents", ICML 2020.
    """
    if isinstance(depth, bool) or depth not in _MYRTLE:
        raise ValueError(f"depth must be one of {sorted(_MYRTLE)} for a Myrtle network, "
                         f"got {depth!r}.")
    a, b, c = _MYRTLE[depth]
    block = (("conv", 3), "relu")
    return (block * a + (("avgpool", 2),) + block * b + (("avgpool", 2),)
            + block * c + ("gap",))


def check_image_shape(image_shape, n_features=None):
    """``image_shape`` as a tuple of three positive ints matching ``n_features``.

    Raises
    ------
    ValueError
        Naming ``image_shape`` when it is not ``(H, W, C)`` or ``H * W * C`` differs
        from the number of features.
    """
    ok = (isinstance(image_shape, (tuple, list)) and len(image_shape) == 3
          and all(isinstance(v, Integral) and not isinstance(v, bool) and v > 0
                  for v in image_shape))
    if not ok:
        raise ValueError(f"image_shape must be a tuple (H, W, C) of three positive integers, "
                         f"got {image_shape!r}.")
    shape = tuple(int(v) for v in image_shape)
    if n_features is not None and shape[0] * shape[1] * shape[2] != n_features:
        raise ValueError(f"image_shape={shape} has {shape[0] * shape[1] * shape[2]} values "
                         f"per image but X has {n_features} features; flattened images must "
                         "have H * W * C columns (row-major, channels last).")
    return shape


def _parse(layer, i, padding):
    """One layer entry -> (kind, size, padding)."""
    if isinstance(layer, str):
        if layer in ("relu", "erf") or layer in READOUTS:
            return layer, 0, None
        raise ValueError(f"layers[{i}] = {layer!r} is not a layer: use 'relu', 'erf', "
                         "('conv', filter_size[, padding]), ('avgpool', window), and "
                         "'flatten' or 'gap' last.")
    if isinstance(layer, (tuple, list)) and layer and layer[0] in ("conv", "avgpool"):
        kind = layer[0]
        n_max = 3 if kind == "conv" else 2
        size = layer[1] if len(layer) > 1 else None
        if (len(layer) < 2 or len(layer) > n_max or isinstance(size, bool)
                or not isinstance(size, Integral) or size < 1):
            form = "('conv', filter_size[, padding])" if kind == "conv" else \
                "('avgpool', window)"
            raise ValueError(f"layers[{i}] = {layer!r}: expected {form} with a positive "
                             "integer size.")
        pad = layer[2] if len(layer) == 3 else padding
        if kind == "conv" and (not isinstance(pad, str) or pad not in PADDINGS):
            raise ValueError(f"layers[{i}] = {layer!r}: padding must be one of {PADDINGS}, "
                             f"got {pad!r}.")
        return kind, int(size), pad
    raise ValueError(f"layers[{i}] = {layer!r} is not a layer: use 'relu', 'erf', "
                     "('conv', filter_size[, padding]), ('avgpool', window), and "
                     "'flatten' or 'gap' last.")


def resolve_layers(layers):
    """A ``layers`` parameter as a tuple of entries (a Myrtle name expanded)."""
    if isinstance(layers, str):
        names = {f"myrtle{d}": d for d in _MYRTLE}
        if layers not in names:
            raise ValueError(f"layers must be a list of layers or one of {sorted(names)}, "
                             f"got {layers!r}.")
        return myrtle_layers(names[layers])
    if not isinstance(layers, (tuple, list)) or not layers:
        raise ValueError(f"layers must be a non-empty list of layers, got {layers!r}.")
    return tuple(layers)


def compile_layers(layers, image_shape, padding="same"):
    """Check an architecture on ``image_shape`` and compile it.

    Returns
    -------
    program : int64 array of shape (n_ops, N_FIELDS)
        One row per conv / activation / pool (fields in this module's header).
    readout : {0, 1}
        0 for "flatten", 1 for "gap".
    traj_len : int
        Length of an image's variance trajectory (the pre-activation variance of every
        pixel at every activation, concatenated).
    max_side : tuple (max h * w over the network)
    pooled : bool
        Whether the network has a pooling layer (a flatten read-out then needs the
        full pixel-pair state).

    Raises
    ------
    ValueError
        Naming ``layers``, ``padding`` or ``image_shape``: an unknown layer, a read-out
        missing or not last, a "valid" filter larger than the map, a pooling window
        that does not divide the map.
    """
    if not isinstance(padding, str) or padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}.")
    entries = resolve_layers(layers)
    parsed = [_parse(layer, i, padding) for i, layer in enumerate(entries)]
    kinds = [p[0] for p in parsed]
    if kinds[-1] not in READOUTS or any(k in READOUTS for k in kinds[:-1]):
        raise ValueError(f"layers must end with one read-out, 'flatten' or 'gap' (and have no "
                         f"other), got {list(entries)!r}.")
    h, w = image_shape[0], image_shape[1]
    rows, traj, max_p, pooled = [], 0, h * w, False
    for i, (kind, size, pad) in enumerate(parsed[:-1]):
        if kind == "conv":
            if pad == "valid":
                if size > h or size > w:
                    raise ValueError(f"layers[{i}]: a 'valid' {size}x{size} filter does not "
                                     f"fit the {h}x{w} map it is applied to.")
                before, ho, wo = 0, h - size + 1, w - size + 1
            else:  # as XLA's SAME: the extra row/column of an even filter goes after
                before, ho, wo = (size - 1) // 2, h, w
            rows.append((CONV, size, before, h, w, ho, wo, -1))
            h, w = ho, wo
        elif kind == "avgpool":
            if h % size or w % size:
                raise ValueError(f"layers[{i}]: a {size}x{size} average pool does not divide "
                                 f"the {h}x{w} map it is applied to; choose a window that "
                                 "divides both sides.")
            rows.append((POOL, size, 0, h, w, h // size, w // size, -1))
            h, w, pooled = h // size, w // size, True
        else:
            rows.append((RELU if kind == "relu" else ERF, 0, 0, h, w, h, w, traj))
            traj += h * w
        max_p = max(max_p, h * w)
    program = np.array(rows, dtype=np.int64).reshape(-1, N_FIELDS)
    return program, READOUTS.index(kinds[-1]), traj, max_p, pooled
