"""The kernel A/B tool's command line (nothing is built here)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv, says", [(["attention", "--old", "main", "--reps", "0"], "--reps"),
                                        (["attention", "--old", "no-such-revision-here"], "not a git revision")])
def test_kernel_ab_refuses_bad_arguments_in_one_line(argv: list[str], says: str, capsys) -> None:
    from radixcheck.model import kernel_ab

    with pytest.raises(SystemExit) as e:
        kernel_ab.main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and says in err and len(err.splitlines()) == 1
