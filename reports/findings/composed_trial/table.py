"""One row per audit run: first FAIL time, oracle labels of the findings, wall time, load."""
import re

rows = {}
for line in open("runs/summary.txt"):
    t, p, tag, rc, wall, load = line.split()
    out = open(f"runs/{t}-{tag}/out.txt").read()
    fails = re.findall(r"^\[ *([0-9.]+) s\] FAIL (\S+)", out, re.M)
    labels = re.findall(r"^--- finding \d+ of \d+ \([^)]*\): (.*)$", out, re.M)
    first = fails[0][0] if fails else "-"
    print(f"| {t} | {tag} ({p}) | {rc[3:]} | {first} | {'; '.join(labels) or '-'} | {float(wall[5:]):.0f} | {load[5:]} |")
