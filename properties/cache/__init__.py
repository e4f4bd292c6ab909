"""The cache contract: a radix-tree KV cache's obligations (``contract``), the state machines that
check them (``machine``, ``scale_machine``), the serving loop and request batches the scheduling
properties use, and the deliberately broken and correct-but-unusual caches that prove the checks
(``mutants``, ``slow_variants``)."""
