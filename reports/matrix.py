"""The conformance matrix, in the spirit of JSONTestSuite: implementations × properties.

    python -m radixcheck.reports.matrix                 # reference + every catalogue mutant, then merge SGLang
    python -m radixcheck.reports.matrix --jobs 2        # (default) two pytest processes at a time
    python -m radixcheck.reports.matrix --report-only   # re-render, refreshing only SGLang's rows

Each implementation runs ``radixcheck audit`` (the conformance tests) in its own process under
the ``audit`` profile (``ci``'s search, stopping at the first bug per test, shrunk within the
budget); every failure's oracle comes from its exception type. SGLang's rows come from
``reports/sglang_audit_results.json`` (``python -m radixcheck.reports.sglang_audit`` builds the
isolated environment they need and regenerates it). Writes ``reports/MATRIX.md`` and
``reports/artifacts/matrix.json``: every failure with a one-line reason and its shrunk program.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from radixcheck.properties.mutants import CORRECT_VARIANTS, MUTANTS
from radixcheck.reports.audit_runner import audit_json
from radixcheck.reports.sglang_audit import OUT_JSON as SGLANG_JSON

ROOT = Path(__file__).resolve().parent.parent
OUT_MD = ROOT / "reports" / "MATRIX.md"
OUT_JSON = ROOT / "reports" / "artifacts" / "matrix.json"


def implementations() -> list[tuple[str, str, str]]:
    """(name, target spec, kind) for every implementation run in this environment."""
    rows = [("reference", "radixcheck.reference:RadixCache", "reference")]
    rows += [(v.__name__, f"radixcheck.properties.mutants:{v.__name__}", "correct variant") for v in CORRECT_VARIANTS]
    rows += [(m.bug_class, f"radixcheck.properties.mutants:{m.__name__}", "mutant") for m in MUTANTS]
    return rows


def run_target(name: str, spec: str, profile: str = "audit") -> dict:
    return {"name": name, "spec": spec, **audit_json(sys.executable, spec, profile)}


def sglang_rows() -> list[dict]:
    if not SGLANG_JSON.exists():
        return []
    rows = []
    for r in json.loads(SGLANG_JSON.read_text())["results"]:
        tests = {}
        for test_id, d in r["tests"].items():  # ids recorded before radixcheck audit carried the module: drop it
            tests[test_id.rpartition("::")[2]] = {k: v for k, v in d.items() if k != "raw"} | (
                {"outcome": "failed"} if d["outcome"] == "error" else {})
        rows.append({"name": f"sglang {r['factory']}", "spec": f"radixcheck.properties.adapters.sglang_radix:{r['factory']}",
                     "seconds": r["seconds"], "tests": tests, "stderr_tail": r.get("stderr_tail", "")})
    return rows


CELL = {"passed": "pass", "failed": "**FAIL**", "skipped": "skip"}

# Where SGLang differs from the contract by design, what its adapters declare, and what that hides.
SGLANG_DESIGN = [
    "No SGLang cache has `evict_prefix` (policy eviction of a named prefix): every factory declares "
    "`supports_quarantine=False`, so the quarantine rules and oracle 5 do not run on them.",
    "SGLang trusts its scheduler to pair every `inc_lock_ref` with one `dec_lock_ref` and never to reuse a "
    "node across caches or resets. `radix_*` declare `checks_locks=False`: the unmatched-unlock, stale-handle "
    "and foreign-handle checks are skipped (a `pass` there means *not checked*). `radix_lru_strict` is the same "
    "cache declaring `checks_locks=True`, to show what those checks find (findings 1 and 4: silent corruption, "
    "not an error). UnifiedRadixCache refuses unmatched unlocks itself, so `unified_*` declare "
    "`checks_locks=True` (`*_lru_lenient`: False).",
    "Only LRU has a precise order oracle (oracle 4); the other policies are held to everything else "
    "(refcount safety, sizes, slot conservation, prefix-set matches, the DFS bound).",
]

# The finding in reports/sglang_findings.md that an SGLang failure reproduces, by its oracle's wording.
SGLANG_FINDING = [
    ("_tlru_history_len", "#2 tlru AttributeError"),
    ("(older) survived", "#3 mid-edge hit refreshes the unused suffix"),
    ("kept going", "#3 mid-edge hit refreshes the unused suffix"),
    ("mutex poisoned", "#5 Rust core poisoned by an unmatched unlock"),
    ("raised but changed the cache", "#7 refused unlock is not atomic"),
    ("accepted it instead of raising", "#1 unmatched unlock accepted (lock_ref -1)"),
    ("stale", "#4 stale handle across reset"),
]


def sglang_finding(name: str, test_id: str, reason: str) -> str:
    if "handle_from_another_cache" in test_id:
        return "#6 Rust node ids name nodes of other caches" if "rust" in name else "#4 foreign handle corrupts sizes"
    return next((f for phrase, f in SGLANG_FINDING if phrase in reason), "")


def _short(test_id: str) -> str:
    return test_id.replace("test_cache_state_machine", "machine").replace("test_", "")


def render(rows: list[dict], profile: str) -> str:
    tests = sorted({t for r in rows for t in r["tests"]})
    disputed = [t for t in tests if len({r["tests"].get(t, {}).get("outcome") for r in rows}) > 1]
    mutant_rows = [r for r in rows if r["name"] in {m.bug_class for m in MUTANTS}]

    def table(columns: list[str]) -> list[str]:
        head = "| implementation | " + " | ".join(f"`{_short(t)}`" for t in columns) + " |"
        lines = [head, "|---|" + "---|" * len(columns)]
        for r in rows:
            cells = [CELL.get(r["tests"].get(t, {}).get("outcome", ""), "—") for t in columns]
            lines.append(f"| `{r['name']}` | " + " | ".join(cells) + " |")
        return lines

    out = [
        "# Conformance matrix",
        "",
        "Regenerate with `python -m radixcheck.reports.matrix` (SGLang rows: `python -m radixcheck.reports.sglang_audit` first). "
        f"Each implementation ran the target-dependent properties in its own pytest process, Hypothesis profile "
        f"`{profile}` for the rows run here (`audit`: ci's search, one shrunk bug per test; `mutation`: the same "
        "search, unshrunk — the mutants' shrunk programs are in `BUG_CATALOGUE.md`); SGLang rows as recorded in "
        "`sglang_audit_results.json`. `skip` = the implementation declares it does not offer what the property "
        "needs (its `capabilities`); `—` = not run for it.",
        "",
        f"Reference passes {sum(d['outcome'] == 'passed' for d in rows[0]['tests'].values())} of "
        f"{len(rows[0]['tests'])}; every mutant fails at least one property: "
        f"{'yes' if all(any(d['outcome'] == 'failed' for d in r['tests'].values()) for r in mutant_rows) else 'NO'}.",
        "",
        "## SGLang: differences by design",
        "",
        *(f"- {line}" for line in SGLANG_DESIGN),
        "",
        "Each SGLang failure below names the finding it reproduces (`sglang_findings.md`, standalone scripts in "
        "`repro/`).",
        "",
        "## Pruned view (only properties on which implementations differ)",
        "",
        *table(disputed),
        "",
        "## Failures",
        "",
    ]
    for r in rows:
        bad = {t: d for t, d in r["tests"].items() if d["outcome"] == "failed"}
        if r.get("stderr_tail"):
            out += [f"### `{r['name']}`", "", "pytest produced no results:", "", "```", r["stderr_tail"], "```", ""]
        if not bad:
            continue
        out += [f"### `{r['name']}` (`{r['spec']}`)", ""]
        for t, d in bad.items():
            finding = sglang_finding(r["name"], t, d.get("reason", "")) if r["name"].startswith("sglang ") else ""
            out += [f"- `{t}` — oracle *{d.get('oracle', 'other')}*{f' — finding {finding}' if finding else ''}: "
                    f"{d.get('reason', '')}"]
            if d.get("program"):
                out += ["", "  ```python", *("  " + ln for ln in d["program"].splitlines()), "  ```", ""]
    out += ["## Full matrix", "", *table(tests), ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--profile", default="audit",
                        help="audit (default: shrunk programs, slow) or mutation (no shrinking: verdicts in minutes)")
    parser.add_argument("--report-only", action="store_true",
                        help="re-render from artifacts/matrix.json, taking SGLang's rows afresh from its results")
    args = parser.parse_args()
    if args.report_only:
        saved = json.loads(OUT_JSON.read_text())
        if isinstance(saved, list):  # written before the profile was recorded: use --profile
            saved = {"profile": args.profile, "rows": saved}
        rows = [r for r in saved["rows"] if not r["name"].startswith("sglang ")]
        args.profile = saved["profile"]
    else:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(lambda impl: run_target(impl[0], impl[1], args.profile), implementations()))
        for r in rows:
            counts = {k: sum(d["outcome"] == k for d in r["tests"].values()) for k in CELL}
            print(f"[matrix] {r['name']:28s} {r['seconds']:7.1f} s  {counts}", flush=True)
    rows += sglang_rows()
    OUT_JSON.parent.mkdir(exist_ok=True)
    kept = [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    OUT_JSON.write_text(json.dumps({"profile": args.profile, "rows": kept}, indent=1) + "\n")
    OUT_MD.write_text(render(rows, args.profile) + "\n")
    print(f"[matrix] wrote {OUT_MD.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
