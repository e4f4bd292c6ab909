"""The planted bugs' table from runs/{ci,s1,s2}: caught, oracle labels, first FAIL seconds."""
import re
from pathlib import Path

import mybugs

for cls in mybugs.BUGS:
    cells, labels = [], set()
    for tag in ("ci", "s1", "s2"):
        out = Path(f"runs/{tag}/{cls.__name__}.out")
        if not out.exists():
            cells.append("-")
            continue
        text = out.read_text()
        first = re.search(r"^\[ *([0-9.]+) s\] FAIL", text, re.M)
        labels |= set(re.findall(r"^--- finding \d+ of \d+ \([^)]*\): (.*)$", text, re.M))
        cells.append(first.group(1) if first else "passed")
    print(f"| `{cls.__name__}` | {' / '.join(cells)} | {'; '.join(sorted(labels))} |")
