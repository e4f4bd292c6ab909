"""The conformance tests: every test here drives the target under test and nothing else.

Run them against your cache from any directory (the pytest plugin provides ``--radix-target``)::

    pytest --pyargs radixcheck.properties.conformance --radix-target mymodule:make

or with a verdict, report card and exit code: ``radixcheck audit mymodule:make``.
"""
