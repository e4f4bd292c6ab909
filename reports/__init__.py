"""radixcheck's reports: the integrated benchmark that regenerates the seed's ledger (``python -m reports``)."""
