"""One written form per namespace: values Python calls equal share it, any other two differ.

The contract compares namespaces by ``==`` and ``hash`` ("Namespaces" in
:mod:`radixcheck.properties.cache.contract`): ``1``, ``1.0`` and ``True`` are one namespace, ``5``
and ``"5"`` two. Whatever writes a namespace out (the wire protocol's JSON, a router's block
hash) writes :func:`canonical_namespace` of it, so that equal namespaces are written alike and a
reader comparing what is written (a JSON value, a hashed ``repr``) keeps the contract's equality:

* a bool is its int (``True`` is ``1``), a float with no fraction is its int (``1.0`` is ``1``,
  ``-0.0`` is ``0``), any other finite float stays a float (``2.5``);
* a tuple is the tuple of its parts' forms; a str, an int and ``None`` are themselves.

A float that is not finite (NaN equals nothing, not even itself) and any other type have no
form here: :func:`canonical_namespace` refuses them with ``TypeError``.
"""

from __future__ import annotations

import math
from typing import Any


def canonical_namespace(namespace: Any) -> Any:
    """``namespace`` in its one written form (module docstring); ``TypeError`` for what has none."""
    if namespace is None or isinstance(namespace, str):
        return namespace
    if isinstance(namespace, bool):
        return int(namespace)
    if isinstance(namespace, int):
        return namespace
    if isinstance(namespace, float):
        if not math.isfinite(namespace):
            raise TypeError(f"namespace {namespace!r}: a float namespace must be finite")
        return int(namespace) if namespace.is_integer() else namespace
    if isinstance(namespace, tuple):
        return tuple(canonical_namespace(part) for part in namespace)
    raise TypeError(f"namespace {namespace!r}: only str, int, float, bool, None and tuples of those have a written form, "
                    f"not {type(namespace).__name__}")
