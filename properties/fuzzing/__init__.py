"""Entry points for long, coverage-guided audit campaigns under HypoFuzz (``reports/FUZZING.md``).

Nothing here is collected by the test gate: the module is not named ``test_*.py``, and a
campaign passes its path to ``hypothesis fuzz`` explicitly.
"""
