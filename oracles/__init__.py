"""Naive, obviously-correct models of what a radix KV cache must do.

Each module is one oracle, small enough to check by eye, and none imports the reference cache:
an oracle that shares code with the implementation it checks proves nothing.
"""
