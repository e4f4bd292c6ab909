"""The audit environment's stamp lists its packages one requirement each (``pip freeze``'s comment
before an editable install without a remote was split into words: '#', 'Editable', 'Git', ...)."""

from radixcheck.reports.audit_env import packages_of

FREEZE = """sglang==0.5.23
# Editable Git install with no remote (radixcheck==0.2.0)
-e /work/wt-engines
torch==2.13.0+cpu
"""


def test_the_stamp_lists_one_requirement_a_line_without_comments() -> None:
    assert packages_of(FREEZE) == ["sglang==0.5.23", "-e /work/wt-engines", "torch==2.13.0+cpu"]
