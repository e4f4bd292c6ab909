"""One line per run from runs/*/audit.json: verdict, findings, seconds, repro sizes."""
import json
import pathlib

for d in sorted(pathlib.Path("runs").glob("*/audit.json")):
    j = json.loads(d.read_text())
    v = j["verdicts"]
    prod = sum(x["seconds"] for x in v if "production" in x["test"])
    fails = [x for x in v if x["outcome"] == "failed"]
    first = None
    t = 0.0
    for x in v:  # the tests run in this order; the first failure's FAIL line comes at the end of its test
        t += x["seconds"]
        if x["outcome"] == "failed":
            first = t
            break
    oracles = sorted({f.get("oracle", "?") for f in j.get("findings", [])} if isinstance(j.get("findings"), list) else [])
    repros = sorted(d.parent.glob("repros/*.py"))
    sizes = ",".join(str(len(r.read_text().splitlines())) for r in repros)
    print(f"{d.parent.name:42s} conforms={j['conforms']!s:5s} total={j['seconds']:.0f}s prod={prod:.0f}s "
          f"first_fail~{first if first is None else round(first)}s findings={len(repros)} [{'; '.join(oracles)}] lines={sizes}")
