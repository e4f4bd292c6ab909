"""Two-bug tenant trees from the suite's mutants: with broad probes, does 'mutual, and one side meets the other
before its own failure' keep two distinct bugs two? Ground truth: each finding's signature against the single
mutants' own signatures (a finding only one of the two bugs gives is that bug's)."""
import itertools

from echo_rule import failures, met, signature

from radixcheck.properties.findings.root_cause import shows_cause
from radixcheck.properties.tenant_tree import mutants as M

BUGS = [M.MatchNamesUnavailableTenant, M.MatchLongerThanQuery, M.SplitLosesOtherTenantsTimes, M.EvictionCrossesTenants,
        M.RemovedTenantLeftInNodes]

def judged(prog_met, own, other, before):
    own_at = prog_met.get(own, (None, 10**9))[1]
    kept = {s for s, (ph, i) in prog_met.items() if s == own or not before or i < own_at}
    return shows_cause(kept, other, own)

own_sigs = {}
for bug in BUGS:
    own_sigs[bug] = {signature(e) for s in range(3) for _, e, _ in failures(bug, s)}
    print(bug.__name__, sorted(own_sigs[bug]), flush=True)
for x, y in itertools.combinations(BUGS, 2):
    pair = type(f"{x.__name__}_{y.__name__}", (x, y), {})
    for seed in range(3):
        got = [(signature(e), m) for _, e, m in failures(pair, seed)]
        progs = [(own, met(m, True)[0]) for own, m in got if m is not None]
        if len(progs) != 2 or progs[0][0] == progs[1][0]:
            print(pair.__name__, seed, "not a pair of findings:", [g[0] for g in got], flush=True)
            continue
        (a, ma), (b, mb) = progs
        truth = "two bugs" if (a in own_sigs[x]) != (b in own_sigs[x]) and (a in own_sigs[y]) != (b in own_sigs[y]) else "unclear"
        mutual = judged(ma, a, b, False) and judged(mb, b, a, False)
        early = judged(ma, a, b, True) or judged(mb, b, a, True)
        print(pair.__name__, seed, truth, "| current(broad):", mutual, "| rule:", mutual and early, "|", a[1][:60], "||", b[1][:60],
              flush=True)
