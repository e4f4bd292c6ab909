"""The KV-event index contract (a KV-aware router's view of its workers' caches): its contract,
the machine that plays the workers' engines (``engines``) and checks an index, the index mutants
and correct variants, an index finding's repro file, and the end-to-end pairing of an engine's
own events with a router's index (``router_contract``, ``router_e2e``)."""
