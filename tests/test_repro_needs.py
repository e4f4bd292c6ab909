"""A repro file's import guard names the packages the file imports, and no other."""

from radixcheck.properties.findings.standalone import needs


def _message(imports: list[str]) -> str:
    return next(line for line in needs(imports) if "cannot import" in line)


def test_an_index_file_says_it_needs_radixcheck_not_numpy() -> None:
    # index repro files said "needs numpy and radixcheck" (index trial): they import no numpy
    line = _message(["from radixcheck.properties.index.contract import BlockStored  # noqa: F401"])
    assert "this file needs radixcheck)" in line and "numpy" not in line


def test_a_slot_pool_file_says_it_needs_numpy_and_radixcheck() -> None:
    assert "this file needs numpy and radixcheck)" in _message(["import numpy as np", "from radixcheck import SlotAllocator"])


def test_the_guard_still_exits_2_when_an_import_fails() -> None:
    lines = needs(["import no_such_module_for_radixcheck"])
    code = "import sys\n" + "\n".join(lines)
    try:
        exec(compile(code, "<repro>", "exec"), {})  # noqa: S102 - the generated guard itself
    except SystemExit as exit_:
        assert exit_.code == 2
    else:
        raise AssertionError("the guard did not exit")
