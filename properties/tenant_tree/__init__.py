"""The third contract: a router's multi-tenant prefix tree (``contract.py``), its state machine
(``machine.py``) and its catalogued mutants and correct variants (``mutants.py``)."""
