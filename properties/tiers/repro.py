"""A standalone repro file for a tier machine's failure: the world's operations, in order, as
plain calls, with every completion the suite delivered written as ``w.complete(n)`` where it
happened and every controller call as a comment under the operation that made it.

The file imports the user's factory and radixcheck's :class:`~radixcheck.properties.tiers.world.TierWorld`
(the two pools, the controller and the tier model: the oracles run as the calls are made), and
nothing of Hypothesis. It exits 1 with the oracle's sentence while the bug is there, 0 once fixed.
The operations come from the failing run itself: after Hypothesis's shrink, its smallest interleaving.
"""

from __future__ import annotations

from radixcheck.properties.findings.failures import oracle_of
from radixcheck.properties.findings.repro import Repro, run_repro
from radixcheck.properties.tiers.world import TierWorld


def tier_script(world: TierWorld, failure: BaseException, spec: str) -> str:
    module, _, attribute = spec.partition(":")
    operations = list(world.log)
    lines = [
        f'"""radixcheck repro: {type(failure).__name__} ({oracle_of(failure)}) on {spec}, {world.write_policy}, '
        f'page size {world.page_size}.',
        "",
        f"{' '.join(str(failure).split())[:300]}",
        '"""',
        "import sys",
        "",
        f"from {module} import {attribute} as factory",
        "from radixcheck.oracles.violations import ContractViolation",
        "from radixcheck.properties.tiers.world import TierWorld",
        "",
        f"w = TierWorld(factory, page_size={world.page_size}, write_policy={world.write_policy!r})",
        "try:",
        *[f"    {line}" for line in operations],
        "    w.check()",
        "except ContractViolation as bug:",
        "    print(f'BUG (radixcheck oracle {bug.oracle}): {bug}')",
        "    sys.exit(1)",
        "print('no bug: every operation passed its oracles')",
    ]
    return "\n".join(lines) + "\n"


def tier_repro(world: TierWorld, failure: BaseException, spec: str) -> Repro:
    """The repro file, run once: it must exit 1 with radixcheck's sentence."""
    text = tier_script(world, failure, spec)
    repro = Repro(text, calls=sum(not line.startswith("#") for line in world.log), size="")
    repro.size = f"{repro.calls} operations"
    repro.exit_code, repro.output = run_repro(text)
    if repro.exit_code != 1 or "BUG (radixcheck" not in repro.output:
        repro.notes.append(f"radixcheck ran this file and it exited {repro.exit_code}, not 1: {repro.output.strip()[-300:]}")
    return repro

