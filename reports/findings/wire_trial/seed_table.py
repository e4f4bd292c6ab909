"""Summarise runs/*.seedN.log (run_seed.sh): per bug and seed, the failing tests and the violation
classes (with the first words of each message) the pytest output names."""
import glob
import re
from collections import defaultdict

rows = defaultdict(dict)
for path in sorted(glob.glob("runs/*.seed*.log") + glob.glob("runs/.seed*.log")):
    bug, seed = re.match(r"runs/(.*)\.seed(\d)\.log", path).groups()
    text = open(path, errors="replace").read()
    failed = re.findall(r"^FAILED \S*::(test_\w+)", text, re.M)
    kind = r"(\w+(?:Violation|Error|Died|Crash|Timeout|Refused))"
    kinds = re.findall(r"^\s*\|?\s*(?:E\s+)?(?:radixcheck\.[\w.]+\.)?" + kind + r": (.{0,90})", text, re.M)
    done = re.search(r"(\d+) (?:failed|passed)", text) is not None
    seen = sorted({k for k, _ in kinds if k not in ("AssertionError",)})
    tests = "+".join(t.replace("test_cache_", "") for t in failed)
    rows[bug or "correct"][seed] = f"FAIL {tests} {','.join(seen)}" if failed else ("pass" if done else "running")
for bug, seeds in rows.items():
    print(bug, "|", " | ".join(f"seed {s}: {seeds[s]}" for s in sorted(seeds)))
