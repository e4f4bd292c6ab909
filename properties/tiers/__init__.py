"""Tiered caches (SGLang HiCache style): the tier contract, the suite's host pool and transfer
controller, and the state machine that delivers transfer completions in every order."""
