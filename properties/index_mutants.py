"""Moved to :mod:`radixcheck.properties.index.mutants`. This path is radixcheck 0.2's, kept so that imports
and audit targets written against it (``radixcheck.properties.index_mutants:Name``) keep working."""

import sys
from importlib import import_module

sys.modules[__name__] = import_module("radixcheck.properties.index.mutants")
