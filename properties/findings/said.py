"""A finding named by what its message says: the ``said: <text>`` clause of a waiver line.

One oracle can fail in several ways (a tenant leak through a host lookup, another through a
quarantine that frees every tenant's host copies): a line that names the oracle alone waives
both, and the second bug hides behind the first. ``said:`` names one of them by the words of its
message, as the audit's card prints it: the line then waives only findings whose message (its
first line) contains the text, ``*`` standing for any run of characters (the token lists and
numbers that differ from run to run). Every other character is itself: a message's brackets and
quotes are not a glob's.

:func:`said_in` is written with Python alone: a repro file embeds its source
(:mod:`radixcheck.properties.findings.repro_waivers`), so the file waives what its run waived, by the
same test.
"""

from __future__ import annotations

import re

SAID = "said:"


def said_in(text: str, message: str) -> bool:
    """Whether ``message`` contains ``text``, each ``*`` in ``text`` standing for any run of characters."""
    pattern = ".*?".join(re.escape(part) for part in text.split("*"))
    return re.search(pattern, message, re.DOTALL) is not None
