"""Judge rules on echo_rule.txt: mutual with broad probes, and one side meeting the other before its own failure."""
import re

blocks, cur = [], None
for line in open("echo_rule.txt"):
    if line.startswith("== "):
        cur = {"title": line.strip(), "progs": []}
        blocks.append(cur)
    elif line.startswith("   machine: own") or line.startswith("   threads: own"):
        own = line.split("own ", 1)[1].strip()
        cur["progs"].append({"own": eval(own), "met": []})
    elif line.strip().startswith("met "):
        m = re.match(r"\s+met (\w+)\s+@\s*(\d+): (.*?) \| (.*)$", line.rstrip("\n"))
        cur["progs"][-1]["met"].append((m.group(1), int(m.group(2)), m.group(3), m.group(4)))
def shows(p, other, strictly_before):
    own_at = next(i for ph, i, o, s in p["met"] if (o, s[:100]) == (p["own"][0], p["own"][1][:100]))
    for _ph, i, o, s in p["met"]:
        if strictly_before and not i < own_at:
            continue
        if (o, s[:100]) == (other[0], other[1][:100]) or (o == other[0] and o != p["own"][0]):
            return True
    return False
for b in blocks:
    if len(b["progs"]) != 2 or "broad" not in b["title"]:
        continue
    a, c = b["progs"]
    mutual = shows(a, c["own"], False) and shows(c, a["own"], False)
    early = shows(a, c["own"], True) or shows(c, a["own"], True)
    print(b["title"], "mutual:", mutual, " one side before own failure:", early, " => rule:", mutual and early)
