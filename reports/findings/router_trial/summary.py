"""One line per planted bug over its runs: caught, oracles, first FAIL time, findings, repro lines."""
import glob
import json
import re
from pathlib import Path

BUGS = "I1 I2 I3 I4 I5 I6 I7 T1 T2 T3 T4 T5 T6 R".split()
for bug in BUGS:
    runs = sorted(glob.glob(f"runs/{bug}-s*/audit.json"), key=lambda p: p.replace("-sd", "-s0"))
    cells, oracles, times, lines = [], set(), [], []
    for path in runs:
        d = json.loads(Path(path).read_text())
        seed = re.search(r"-s(\w+)/", path).group(1)
        out = Path(path).with_name("out.txt").read_text()
        m = re.search(r"\[\s*([\d.]+) s\] FAIL", out)
        times.append(f"{m.group(1)}" if m else "-")
        cells.append(f"{seed}:{'caught' if not d['conforms'] else 'missed'}({len(d['findings'])})")
        oracles |= {f["oracle"].split(" (")[0] if f["oracle"].startswith("crash") else f["oracle"] for f in d["findings"]}
        lines += [sum(1 for _ in open(f["repro"])) for f in d["findings"] if f.get("repro")]
    caught = sum(c.split(":")[1].startswith("caught") for c in cells)
    print(f"| {bug} | {caught}/{len(cells)} | {'; '.join(sorted(oracles)) or '-'} | {' / '.join(times)} | "
          f"{' '.join(cells)} | {min(lines) if lines else '-'}-{max(lines) if lines else '-'} |")
