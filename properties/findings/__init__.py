"""What happens once a contract is broken, for every contract: the run that gets a verdict in
seconds (``verdict``), the record of what was sent (``transcript``), the reading of a failure
(``failures``), known findings (``waivers``), and the small standalone repro file (``reduce``,
``repro``, in the frame every contract's file shares: ``standalone``)."""
