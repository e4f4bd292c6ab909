"""Adapters that put third-party radix caches behind radixcheck's cache contract.

Each module here is a thin factory layer for one implementation. Importing a module never
imports the third-party package: that happens inside the factory, so the main gate can
collect the suite without it. See ``sglang_radix.py``.
"""
