"""Task 2 probe: can 'an echo appears only after the first failure's step' tell an echo from a second meeting?

For each tenant-tree finding's program (machine, threaded round rerun on one thread) of the router trial's
T2/T3/T5 and of the meta-test's two-bug tree, replay past failures with R's broad probes (route, read, trim)
or the shipped read-only ones, recording where each signature is first met: in the program (before or after the
program's own failure) or in the probes. Then judge candidate rules on which pairs join."""
import sys
from pathlib import Path

from hypothesis import settings

from radixcheck import profiles
from radixcheck.properties.findings.root_cause import shows_cause, signature
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import BudgetSpent, time_budget
from radixcheck.properties.tenant_tree.machine import TenantTreeMachine, stress_with_threads, tenant_tree_machine_for
from radixcheck.properties.tenant_tree.mutants import EvictionCrossesTenants, MatchLongerThanQuery

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the trial's mybugs and myrouter
import mybugs  # noqa: E402

TRIMS = 64


class TwoBugs(MatchLongerThanQuery, EvictionCrossesTenants):
    pass


def probe(tree, sent, broad):
    if broad:
        for tenant in list(tree.present):
            for key in list(tree.known):
                if not sent(lambda key=key, tenant=tenant: tree._insert(key, tenant)):
                    return
    if not sent(tree._check_every_known):
        return
    for tenant in list(tree.present):
        for key in list(tree.known):
            if not sent(lambda key=key, tenant=tenant: tree._match(key, frozenset([tenant]))):
                return
    if broad and tree.capabilities.supports_eviction:
        for tenant in list(tree.present):
            for _ in range(TRIMS):
                if tree.model.size(tenant) == 0:
                    break
                if not sent(lambda tenant=tenant: tree._evict(tenant, 1)):
                    return


def met(machine, broad):
    """[(signature, phase)] first met, phase in program/probe, with the index of the call."""
    made = tenant_tree_machine_for(type(machine).factory, type(machine).capabilities, "root_cause")
    program = list(machine.program)
    out, phase, n = {}, ["program"], [0]

    def seen(exc):
        s = signature(exc)
        out.setdefault(s, (phase[0], n[0]))
        return True

    tree = made()

    def sent(call):
        n[0] += 1
        for step in (call, tree.sizes_agree if tree.capabilities.reports_sizes else None, tree._check_memory):
            if step is None:
                continue
            try:
                step()
            except Exception as exc:  # noqa: BLE001
                seen(exc)
        return True
    try:
        with time_budget(60):
            for name, args, kwargs in program:
                sent(lambda name=name, args=args, kwargs=kwargs: getattr(tree, name)(*args, **kwargs))
            phase[0] = "probe"
            probe(tree, sent, broad)
    except BudgetSpent:
        pass
    finally:
        tree.teardown()
    return out, len(program)


def seeded():
    return settings(profiles.SETTINGS["audit"], derandomize=True, database=None)


def failures(factory, seed):
    name = f"echo_{factory.__name__}_seed{seed}"
    machine = tenant_tree_machine_for(factory, factory.capabilities, name)
    got = []
    for test, run in (("machine", lambda: run_machine(machine, seeded())),
                      ("threads", lambda: stress_with_threads(factory, factory.capabilities))):
        try:
            run()
        except Exception as exc:  # noqa: BLE001
            m = getattr(exc, "radixcheck_machine", None)
            got.append((test, exc, m if isinstance(m, TenantTreeMachine) and m.program else None))
    return got


RULES = {
    "current (anywhere)": lambda phase, idx, own_idx: True,
    "program only (not probes)": lambda phase, idx, own_idx: phase == "program",
    "not after own failure": lambda phase, idx, own_idx: own_idx is None or idx <= own_idx,
    "probes only": lambda phase, idx, own_idx: phase == "probe",
}


def joined(a, b, rule):
    (sa, meta), (sb, metb) = a, b
    def shows(met_, own, of):
        own_idx = met_.get(own, (None, None))[1]
        kept = {s for s, (ph, i) in met_.items() if s == own or RULES[rule](ph, i, own_idx)}
        return shows_cause(kept, of, own)
    return shows(meta, sa, sb) and shows(metb, sb, sa)


def main():
    factories = {"T2": mybugs.T2, "T3": mybugs.T3, "T5": mybugs.T5}
    TwoBugs.capabilities = TwoBugs.capabilities
    factories["TwoBugs"] = TwoBugs
    for label, factory in factories.items():
        for seed in range(3):
            got = failures(factory, seed)
            for broad in (False, True):
                rows = []
                for test, exc, m in got:
                    if m is None:
                        rows.append((test, signature(exc), None))
                        continue
                    shown, plen = met(m, broad)
                    rows.append((test, signature(exc), shown))
                print(f"== {label} seed {seed} probes={'broad' if broad else 'read-only'}")
                for test, own, shown in rows:
                    print(f"   {test}: own {own}")
                    for s, (ph, i) in (shown or {}).items():
                        print(f"      met {ph:7s} @{i:4d}: {s[0]} | {s[1][:110]}")
                pair = [(own, shown) for _, own, shown in rows if shown is not None]
                if len(pair) == 2 and pair[0][0] != pair[1][0]:
                    print("   joins: " + "; ".join(f"{r}={joined(pair[0], pair[1], r)}" for r in RULES))
                elif len(pair) == 2:
                    print("   one signature already (grouped by shape)")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
