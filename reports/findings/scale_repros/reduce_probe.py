"""Reduce the in-process deep-reset finding (resetrec.py, beside this file) and time each replay.

Run from this directory: ``python reduce_probe.py [SECONDS]`` (the reduction's budget, default 60).
It writes ``probe_repro.py`` here and prints each replay's act count, verdict and time."""

import os
import sys
import time

os.environ["RADIXCHECK_SHRINK_SECONDS"] = "0"
sys.path.insert(0, os.getcwd())

import resetrec  # noqa: E402

import radixcheck.properties.findings.reduce as reduce_module  # noqa: E402
from radixcheck import profiles  # noqa: E402
from radixcheck.properties.cache.scale_machine import scale_machine_for  # noqa: E402
from radixcheck.properties.findings.repro import repro_for  # noqa: E402
from radixcheck.properties.findings.verdict import run_machine  # noqa: E402

make = resetrec.make
make.capabilities = resetrec.ResetsRecursively.capabilities
started = time.monotonic()
try:
    run_machine(scale_machine_for(make, make.capabilities, 1, "probe_reset"), profiles.SETTINGS["mutation"], transcript=True)
    sys.exit("the world passed: no finding to reduce")
except Exception as exc:  # noqa: BLE001 - the finding
    failure = exc
print(f"run: {time.monotonic() - started:.1f} s wall")
untimed = reduce_module.replay


def timed(machine_class, acts, options=None, waived=None, trim_queries=False):  # noqa: ANN001, ANN201
    cpu, wall = time.process_time(), time.monotonic()
    out = untimed(machine_class, acts, options, waived, trim_queries)
    verdict = "fails" if out.failure is not None else "passes"
    print(f"  replay {len(acts)} acts: {verdict} {time.process_time() - cpu:.2f} s CPU {time.monotonic() - wall:.2f} s wall")
    return out


reduce_module.replay = timed
cpu, wall = time.process_time(), time.monotonic()
repro = repro_for(failure, "resetrec:make", seconds=float(sys.argv[1]) if len(sys.argv) > 1 else 60.0)
print(f"repro_for: {time.monotonic() - wall:.1f} s wall, {time.process_time() - cpu:.1f} s CPU; notes {repro.notes}")
with open("probe_repro.py", "w") as file:
    file.write(repro.text or "")
print((repro.text or "").count("\n"), "lines", len((repro.text or "").encode()), "bytes", "exit", repro.exit_code)
