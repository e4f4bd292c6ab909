"""The bug table from runs/*/B*/log.txt: caught, oracle, first FAIL (s), findings, repro calls."""
import re
from pathlib import Path

from mybugs import BUGS

rows = []
for bug, (switch, raw) in BUGS.items():
    cells, oracles, findings, calls = [], set(), [], []
    for stream in ("d", "1", "2", "3"):
        log = Path(f"runs/{stream}/{bug}/log.txt")
        if not log.exists():
            cells.append("?")
            continue
        text = log.read_text()
        first = re.search(r"\[\s*([\d.]+) s\] FAIL \S+ \([\d.]+ s\)  ([^:]+):", text)
        cells.append(first.group(1) if first else "—")
        if first:
            oracles.add(first.group(2))
        n = re.search(r"(\d+) finding\(s\)", text)
        findings.append(n.group(1) if n else "0")
        calls += re.findall(r"\((\d+) index calls\)", text)
    caught = sum(c not in ("—", "?") for c in cells)
    rows.append(f"| {bug} `{switch}` | {'raw' if raw else 'dedup'} | {caught}/4 | {', '.join(sorted(oracles)) or '—'} | "
                f"{' / '.join(cells)} | {'/'.join(findings)} | {', '.join(sorted(set(calls), key=int)) or '—'} |")
print("| bug | stream | caught | oracle | first FAIL d / 1 / 2 / 3 (s) | findings | repro calls |")
print("|---|---|---|---|---|---|---|")
print("\n".join(rows))
