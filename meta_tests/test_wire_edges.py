"""The wire protocol's edges (issue 40 item 8): a server that does not start is exit 2 in one
line, before any test (it was a 25-line traceback and exit 1); ``init`` gets the limit WIRE.md
states; a server cannot declare what the protocol cannot carry."""

from __future__ import annotations

import shlex
import sys
import time
from typing import Any

import pytest

from radixcheck.cli import main
from radixcheck.properties.adapters import wire
from radixcheck.properties.findings.failures import EXPLAINED_LINE, explaining_the_cache
from radixcheck.properties.target import TIMEOUT_ENV, OperationTimeout, TargetError, guarded, load_target


class _Unstartable:
    """A factory whose capabilities start something that fails (as a wire server's do)."""

    @property
    def capabilities(self) -> Any:
        raise wire.WireServerDied("cannot start the wire server ./my-server: [Errno 2] No such file or directory")

    def __call__(self, allocator: Any, page_size: int = 1) -> Any:
        raise AssertionError("never built")


unstartable = _Unstartable()


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("radixcheck: error: "), err
    return err


def test_capabilities_that_raise_make_a_target_error_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TargetError, match=r"reading its capabilities failed: WireServerDied: cannot start the wire server"):
        load_target("meta_tests.test_wire_edges:unstartable")
    _one_line_exit_2(["audit", "meta_tests.test_wire_edges:unstartable"], capsys)


def test_a_wire_server_that_is_not_found_is_exit_2_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(wire.CMD_ENV, "/nonexistent/my-cache-server --port 0")
    err = _one_line_exit_2(["audit", "radixcheck.properties.adapters.wire:server", "-n", "0"], capsys)
    assert "cannot start the wire server /nonexistent/my-cache-server --port 0: [Errno 2]" in err


def test_init_gets_60_s_or_a_longer_per_operation_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert wire.startup_timeout() == 60.0
    monkeypatch.setenv(TIMEOUT_ENV, "90")
    assert wire.startup_timeout() == 90.0


EXITS = "import sys; print('libfoo.so: cannot open shared object file', file=sys.stderr); sys.exit(3)"


@pytest.mark.deep
@pytest.mark.parametrize(("command", "said"), [
    ([sys.executable, "-c", EXITS], "stopped: it exited with code 3; its stderr ends: 'libfoo.so: cannot open shared object file'"),
    ([sys.executable, "-c", "print('hello', flush=True); input()"], "the reply to init (id 1) is not JSON: b'hello'"),
    (wire.reference_command() + ["--capabilities", '{"lifecycle": "requests", "key_mode": "bigram"}'],
     "its capabilities are not radixcheck's: "),
], ids=["exits", "not the protocol", "refused capabilities"])
def test_a_wire_server_that_does_not_start_is_exit_2_in_one_line(command: list[str], said: str, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(wire.CMD_ENV, shlex.join(command))
    err = _one_line_exit_2(["audit", "radixcheck.properties.adapters.wire:server", "-n", "0"], capsys)
    assert said in err, err


# ---- python -m radixcheck.reports.wire_cost --server CMD ---------------------------------------------------------


@pytest.mark.parametrize("server", ["", "'unclosed"])
def test_wire_cost_refuses_a_bad_server_argument(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    from radixcheck.reports import wire_cost

    with pytest.raises(SystemExit) as exited:
        wire_cost.main(["--server", server])
    assert exited.value.code == 2 and "--server" in capsys.readouterr().err


def test_wire_cost_says_in_one_line_that_a_server_did_not_start(capsys: pytest.CaptureFixture[str]) -> None:
    from radixcheck.reports import wire_cost

    assert wire_cost.main(["--requests", "1", "--rounds", "1", "--server", "/nonexistent/my-cache-server"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "cannot start the wire server /nonexistent/my-cache-server" in err


@pytest.mark.deep
def test_wire_cost_times_the_server_it_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    from radixcheck.reports import wire_cost

    server = shlex.join(wire.reference_command() + ["--cache", "radixcheck.properties.cache.mutants:MostRecentFirst"])
    assert wire_cost.main(["--requests", "20", "--rounds", "1", "--server", server]) == 0
    table = capsys.readouterr().out
    assert f"--server {shlex.quote(server)}`" in table and f"behind the server `{server}`" in table
    assert "| round trip |" in table and "| insert |" in table


# ---- Hypothesis's "Explanation" names the cache's lines, not radixcheck's own ----------------------------------


def _explained(*paths: str) -> RuntimeError:
    exc = RuntimeError("the wire server hung")
    for note in ["Falsifying example: test_dfs_order_meets_the_bound(...)", "Explanation:",
                 "    These lines were always and only run by failing test cases:", *(f"        {p}" for p in paths),
                 "You can reproduce this example by ..."]:
        exc.add_note(note)
    return exc


def test_an_explanation_keeps_the_caches_lines_and_drops_radixchecks(tmp_path: Any) -> None:
    own = f"{wire.__file__}:148"
    mine = f"{tmp_path / 'my_cache.py'}:42"
    exc = _explained(own, mine)
    explaining_the_cache(exc)
    assert exc.__notes__[1:4] == ["Explanation:", "    These lines were always and only run by failing test cases:", f"        {mine}"]
    assert exc.__notes__[-1].startswith("You can reproduce")


def test_an_explanation_of_radixchecks_lines_alone_is_replaced_by_why() -> None:
    exc = ExceptionGroup("two", [_explained(f"{wire.__file__}:148", f"{wire.__file__}:150"), ValueError("x")])
    explaining_the_cache(exc)
    notes = exc.exceptions[0].__notes__
    assert "Explanation:" not in notes and len(notes) == 3
    assert notes[1].startswith("radixcheck: Hypothesis's explanation named only radixcheck's own code (2 line(s))")


def test_the_explanation_format_is_hypothesis_own() -> None:
    """A canary: the notes read above are those Hypothesis writes (its scrutineer's stub)."""
    from hypothesis.internal.scrutineer import EXPLANATION_STUB

    assert EXPLANATION_STUB == ("Explanation:", "    These lines were always and only run by failing test cases:")
    assert EXPLAINED_LINE.match(f"        {wire.__file__}:148")


def spin(seconds: float) -> None:
    """Compute for ``seconds`` of CPU time."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


class SlowStart:
    """A wire connection whose server takes longer to start than the per-operation limit."""

    def __init__(self, command: list[str]) -> None:
        spin(0.3)  # CPU time: a sleep would not count against the limit anyway
        self.command, self.dead = command, None


def test_a_server_restarted_inside_a_call_counts_against_init_s_limit_not_the_call_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The factory (re)starts the server inside a guarded call: a start slower than the call's limit
    is not a hang of ``factory`` (init has its own limit); the call's own work still is."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    monkeypatch.setattr(wire, "WireConnection", SlowStart)
    factory = wire.WireFactory(["a-server"])
    assert isinstance(guarded("factory", factory.connection), SlowStart)  # 0.3 s of start, under a 0.2 s limit

    def slow_after_the_start() -> None:
        factory._connection = None
        factory.connection()
        spin(0.3)  # the call's own work: the limit resumes after the start

    with pytest.raises(OperationTimeout):
        guarded("factory", slow_after_the_start)
