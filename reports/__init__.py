"""radixcheck's reports: the integrated benchmark that regenerates the design document's ledger
(``python -m radixcheck.reports``), the bug catalogue, the kill rates and the engine audits.

In a checkout the generated tables live beside this code, under ``reports/``; an installed
radixcheck writes them to ``./radixcheck-reports`` in the working directory instead (never into
site-packages). Every command takes ``--out`` to choose.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def default_out() -> Path:
    """``reports/`` in a checkout; ``./radixcheck-reports`` when radixcheck is installed."""
    if {"site-packages", "dist-packages"} & set(HERE.parts):
        return Path.cwd() / "radixcheck-reports"
    return HERE
