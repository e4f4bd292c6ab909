"""Audit entry point for SGLang's radix caches: build the isolated env, run the suite per adapter.

    python reports/sglang_audit.py                      # build .audit-venv if needed, run all
    python reports/sglang_audit.py radix_lru unified_rust_lru
    python reports/sglang_audit.py --profile dev --seeds 1 2 3   # randomized, more search
    python reports/sglang_audit.py --no-build           # use the existing .audit-venv as is

For every factory in ``properties.adapters.sglang_radix.FACTORIES`` (or those named) it runs,
in the audit venv, the target-dependent tests of ``properties/`` (those whose test functions
take the ``target`` fixture) with ``--radix-target properties.adapters.sglang_radix:<factory>``,
each factory in its own pytest process, and writes

* ``reports/sglang_audit_results.md``: factory x test -> passed / failed / skipped, each
  failure with its first assertion line and Hypothesis's shrunk failing program;
* ``reports/sglang_audit_results.json``: the same, machine-readable.

The main gate never runs this; it needs nothing from here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".audit-venv" / "bin" / "python"
OUT_MD = ROOT / "reports" / "sglang_audit_results.md"
OUT_JSON = ROOT / "reports" / "sglang_audit_results.json"
TARGET_MODULE = "properties.adapters.sglang_radix"


def target_test_files() -> list[str]:
    """Test files with a test function taking the ``target`` fixture."""
    pat = re.compile(r"def test_\w+\([^)]*\btarget\b", re.S)
    return sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "properties").glob("test_*.py") if pat.search(p.read_text())
    )


def factories() -> dict[str, dict]:
    code = (
        f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); import os; os.environ['RADIXCHECK_SGLANG_LAZY']='1';"
        "from properties.adapters.sglang_radix import FACTORIES as F;"
        "print(json.dumps({k: repr(f.capabilities) for k, f in F.items()}))"
    )
    out = subprocess.run([str(PY), "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _falsifying_program(text: str) -> str:
    """Hypothesis's printed failing program(s): the lines from 'state = ' to 'state.teardown()'."""
    progs, cur = [], None
    for line in text.splitlines():
        s = re.sub(r"^E\s+", "", line.strip()).lstrip("|").strip()
        if s.startswith("state = "):
            cur = [s]
        elif cur is not None:
            cur.append(s)
            if s.startswith("state.teardown()"):
                progs.append("\n".join(cur))
                cur = None
    if not progs:
        m = re.search(r"Falsifying example: .*?(?=\n\S|\Z)", text, re.S)
        return m.group(0).strip() if m else ""
    # The invariant calls after every step add no information to a reproduction.
    cleaned = []
    for p in progs:
        lines = [ln for ln in p.splitlines() if ln not in ("state.sizes_add_up()", "state.slots_conserved()")]
        cleaned.append("\n".join(lines))
    return "\n\n".join(dict.fromkeys(cleaned))  # junit reports carry the same program more than once


def _first_error(text: str) -> str:
    for line in text.splitlines():  # pytest's own "E   ..." lines first
        if re.match(r"^E\s+\S", line):
            return re.sub(r"^E\s+", "", line).strip()[:300]
    for line in text.splitlines():
        s = line.strip().lstrip("|").strip()
        if re.match(r"^(E\s+)?\w*(Error|Exception|Timeout)\b.*:", s) and "Traceback" not in s:
            return s.removeprefix("E").strip()[:300]
    return text.strip().splitlines()[0][:300] if text.strip() else ""


def run_suite(python: str, spec: str, files: list[str], profile: str, seed: int | None = None) -> tuple[float, int, dict, str]:
    """Run ``files`` against target ``spec`` in its own pytest process (interpreter ``python``);
    returns (seconds, exit code, {test id: outcome and details}, stderr tail if no test reported)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [python, "-m", "pytest", *files, "-p", "no:cacheprovider", "-n", "0", "-q",
               "--radix-target", spec, f"--junitxml={xml}", "-o", "junit_logging=no"]
        if seed is not None:
            cmd.append(f"--hypothesis-seed={seed}")
        env = dict(os.environ, HYPOTHESIS_PROFILE=profile, RUST_BACKTRACE="0")
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = round(time.monotonic() - t0, 1)
        tests: dict[str, dict] = {}
        if xml.exists():
            for case in ET.parse(xml).getroot().iter("testcase"):
                tid = f"{Path(case.get('file') or case.get('classname', '').replace('.', '/')).stem}::{case.get('name')}"
                outcome, detail = "passed", {}
                for child in case:
                    if child.tag in ("failure", "error"):
                        body = (child.text or "") + "\n" + (child.get("message") or "")
                        outcome = "failed" if child.tag == "failure" else "error"
                        detail = {"reason": _first_error(body), "program": _falsifying_program(body),
                                  "raw": body[-8000:]}
                    elif child.tag == "skipped":
                        outcome, detail = "skipped", {"reason": (child.get("message") or "")[:300]}
                tests[tid] = {"outcome": outcome, **detail}
    return seconds, proc.returncode, tests, "" if tests else proc.stderr[-2000:]


def run_factory(name: str, files: list[str], profile: str, seed: int | None) -> dict:
    seconds, code, tests, stderr_tail = run_suite(str(PY), f"{TARGET_MODULE}:{name}", files, profile, seed)
    return {"factory": name, "seconds": seconds, "exit": code, "tests": tests, "stderr_tail": stderr_tail}


def write_reports(results: list[dict], caps: dict[str, str], profile: str, seed: int | None) -> None:
    OUT_JSON.write_text(json.dumps({"profile": profile, "seed": seed, "results": results}, indent=1))
    all_tests = sorted({t for r in results for t in r["tests"]})
    short = {"passed": "pass", "failed": "**FAIL**", "error": "**ERROR**", "skipped": "skip"}
    lines = [
        "# SGLang radix caches against the radixcheck suite",
        "",
        f"Generated by `python reports/sglang_audit.py` (Hypothesis profile `{profile}`"
        + (f", seed {seed}" if seed is not None else "") + "). sglang 0.5.23, torch 2.13.0 CPU.",
        "Findings and their standalone reproductions: `reports/sglang_findings.md`.",
        "",
        f"Tests run (those taking the `target` fixture): {len(all_tests)}.",
        "",
        "| factory | s | passed | failed | skipped | failing tests |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        by = {k: [t for t, d in r["tests"].items() if d["outcome"] == k] for k in short}
        failing = ", ".join(f"`{t}`" for t in by["failed"] + by["error"]) or "-"
        lines.append(f"| `{r['factory']}` | {r['seconds']} | {len(by['passed'])} | "
                     f"{len(by['failed']) + len(by['error'])} | {len(by['skipped'])} | {failing} |")
    lines += ["", "## Failures", ""]
    for r in results:
        bad = {t: d for t, d in r["tests"].items() if d["outcome"] in ("failed", "error")}
        if not bad and not r.get("stderr_tail"):
            continue
        lines += [f"### `{r['factory']}`", "", f"capabilities: `{caps.get(r['factory'], '?')}`", ""]
        if r.get("stderr_tail"):
            lines += ["pytest did not produce results:", "", "```", r["stderr_tail"], "```", ""]
        for t, d in bad.items():
            lines += [f"- `{t}`: {d.get('reason', '')}"]
            if d.get("program"):
                lines += ["", "  ```python", *("  " + ln for ln in d["program"].splitlines()), "  ```", ""]
    skipped: dict[tuple[str, str], list[str]] = {}
    for r in results:
        for t, d in r["tests"].items():
            if d["outcome"] == "skipped":
                why = d.get("reason", "").replace(f"{TARGET_MODULE}:{r['factory']}", "the target")
                skipped.setdefault((t, why), []).append(r["factory"])
    if skipped:
        lines += ["", "## Skips (by capability)", ""]
        lines += [f"- `{t}`: {why} ({', '.join(fs)})" for (t, why), fs in sorted(skipped.items())]
    OUT_MD.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("factories", nargs="*", help="factory names (default: all)")
    ap.add_argument("--no-build", action="store_true", help="do not (re)build .audit-venv")
    ap.add_argument("--profile", default="audit",
                    help="Hypothesis profile (conftest.py): audit (default: ci's search, first bug per test), "
                         "ci (every distinct bug), dev, thorough")
    ap.add_argument("--jobs", type=int, default=2, help="factories run in parallel")
    ap.add_argument("--report-only", action="store_true", help="only re-render the Markdown from the JSON")
    ap.add_argument("--merge", action="store_true",
                    help="keep results of factories not rerun from the existing results JSON")
    ap.add_argument("--seed", type=int, default=None, help="--hypothesis-seed for every run")
    args = ap.parse_args()
    t0 = time.monotonic()
    if args.report_only:
        data = json.loads(OUT_JSON.read_text())
        for r in data["results"]:
            for d in r["tests"].values():
                if d.get("raw"):
                    d["reason"], d["program"] = _first_error(d["raw"]), _falsifying_program(d["raw"])
        write_reports(data["results"], factories(), data["profile"], data["seed"])
        return
    if not args.no_build:
        subprocess.run([sys.executable, str(ROOT / "reports" / "audit_env.py")], check=True)
    caps = factories()
    names = args.factories or list(caps)
    files = target_test_files()
    print(f"[sglang-audit] {len(names)} factories x {files}", flush=True)
    from concurrent.futures import ThreadPoolExecutor

    done: dict[str, dict] = {}
    order = list(names)
    if args.merge and OUT_JSON.exists():
        for r in json.loads(OUT_JSON.read_text())["results"]:
            if r["factory"] not in names:
                done[r["factory"]] = r
        order = [n for n in caps if n in done or n in names]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_factory, n, files, args.profile, args.seed): n for n in names}
        for fut in futures:
            r = fut.result()
            counts: dict[str, int] = {}
            for d in r["tests"].values():
                counts[d["outcome"]] = counts.get(d["outcome"], 0) + 1
            print(f"[sglang-audit] {r['factory']:28s} {r['seconds']:7.1f} s  {counts or 'NO RESULTS'}", flush=True)
            done[r["factory"]] = r
            write_reports([done[n] for n in order if n in done], caps, args.profile, args.seed)
    print(f"[sglang-audit] done in {time.monotonic() - t0:.0f} s; see {OUT_MD.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
