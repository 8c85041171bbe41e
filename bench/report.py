"""The table printed at the end of a run, and bench/results/latest.json."""

from __future__ import annotations

import json
import math
import platform
import time
from pathlib import Path

from . import doors
from .procs import server_cpu_per_1k

RESULTS = Path(__file__).resolve().parent / "results"

TARGETS = {
    "relay": "<= 1.2x",
    "stretch": "<= 1.2 (C=200)",
    "first_p95": "<= 250 ms (C=200)",
    "idle": "<= 100 KiB",
    "replay": "<= 1 s",
    "rows": "<= 30",
}


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value}{unit}"


def table(results: dict) -> str:
    lines = []
    for stack in results["stacks"]:
        name = stack["label"]
        lines.append(f"\n== {name} ==")
        if "error" in stack:
            lines.append(f"  FAILED: {stack['error']}")
        r = stack.get("relay")
        if r:
            lines.append(
                f"  relay {r['tokens']} tokens: direct {r['direct_s']} s, through the server "
                f"{r['relayed_s']} s, ratio {r['ratio']}x   (target {TARGETS['relay']}); "
                f"raw direct read {r.get('direct_raw_s')} s, ratio {r.get('ratio_raw')}x"
                + (f"  PROBLEMS {r['problems']}" if r["problems"] else "")
            )
        lines += _first_text_lines(stack.get("first_text"))
        c = stack.get("concurrency")
        if c:
            lines.append(
                f"  concurrency, {c['tokens']} tokens at {c['rate']:g}/s each; one alone: "
                f"{c['solo']['wall_s']} s   (targets: C=200 stretch {TARGETS['stretch'].split(' (')[0]}, "
                f"first text p95 {TARGETS['first_p95'].split(' (')[0]})"
            )
            lines.append(
                "     C   wall s  stretch  first text p50/p95/p99 ms  added p99 ms  gap p99 ms  ok      "
                "CPU s server/model/client"
            )
            for lv in c["levels"]:
                ft = lv["first_text_ms"]
                servers = "+".join(f"{v:g}" for k, v in lv["cpu_s"].items() if k.startswith("server"))
                lines.append(
                    f"  {lv['C']:4d}  {lv['wall_s']:7.2f}  {lv['stretch']:7.2f}  "
                    f"{ft['p50']:>7} / {ft['p95']:>7} / {ft['p99']:>7}  {lv['added_ms_p99']:>12}  "
                    f"{lv['frame_gap_ms_p99']:>10}  {lv['ok']:>3}/{lv['C']:<3}  "
                    f"{servers}/{lv['cpu_s'].get('model')}/{lv['cpu_s'].get('client')}"
                )
                for problem in lv["problems"]:
                    lines.append(f"        problem: {problem}")
            f = c.get("sdk_floor")
            if f:
                lines.append(
                    f"  floor: the SDK alone opening {f['C']} streams at once (no server): first chunk "
                    f"p50/p95 {f['first_chunk_ms']['p50']} / {f['first_chunk_ms']['p95']} ms, "
                    f"{f['client_cpu_ms_per_request']} ms CPU per request"
                )
        lines += doors.lines(stack.get("doors"))
        i = stack.get("idle")
        if i:
            lines.append(
                f"  idle: {i['sockets']} sockets ({i['failed']} failed): {i['kib_per_socket']} KiB each "
                f"(RSS {i['rss_before_mib']} -> {i['rss_after_mib']} MiB), idle CPU {i['idle_cpu_pct']}% "
                f"of a core   (target {TARGETS['idle']})"
            )
        p = stack.get("replay")
        if p:
            lines.append(
                f"  replay: {p['events']} events until sync in {p['sync_s']} s (runs {p['sync_s_all']})"
                f"   (target {TARGETS['replay']})" + (f"  PROBLEMS {p['problems']}" if p["problems"] else "")
            )
        for key, label in (("writes_fast", "full speed"), ("writes_paced", "100 tokens/s")):
            w = stack.get(key)
            if w:
                lines.append(
                    f"  writes ({label}): {w['rows_per_1k_tokens']} rows inserted per 1k tokens, "
                    f"~{w['row_writes_per_1k_tokens']} row writes incl. updates   (target {TARGETS['rows']})"
                )
    relay_idle = results.get("reference_idle")
    if relay_idle:
        i = relay_idle.get("idle")
        lines.append(f"\n== {relay_idle['label']} ==")
        if i:
            lines.append(
                f"  idle: {i['sockets']} sockets ({i['failed']} failed): {i['kib_per_socket']} KiB each "
                f"(RSS {i['rss_before_mib']} -> {i['rss_after_mib']} MiB), idle CPU {i['idle_cpu_pct']}% of a core"
            )
        else:
            lines.append(f"  idle: {relay_idle.get('error')}")
    ref = results.get("reference")
    if ref:
        lines.append(f"\n== {ref['label']} ==")
        if "error" in ref:
            lines.append(f"  FAILED: {ref['error']}")
        lines += _first_text_lines(ref.get("first_text"))
        for lv in ref.get("concurrency", {}).get("levels", []):
            ft = lv["first_text_ms"]
            lines.append(
                f"  C={lv['C']}: stretch {lv['stretch']}, first text p50/p95 {ft['p50']} / {ft['p95']} ms, "
                f"server CPU {server_cpu_per_1k(lv, ref['concurrency']['tokens'])} s per 1k tokens, "
                f"ok {lv['ok']}/{lv['C']}"
            )
    lines.append(f"\nsuite time: {results['elapsed_s']} s")
    return "\n".join(lines)


def _first_text_lines(f: dict | None) -> list[str]:
    if not f or not f.get("first_text_ms"):
        return []
    t, m = f["first_text_ms"], f["model_first_token_ms"]
    return [
        f"  one stream at a time ({f['runs']} runs): first text p50/p95 {t['p50']} / {t['p95']} ms, "
        f"the model's first token {m['p50']} / {m['p95']} ms" + (f"  PROBLEMS {f['problems']}" if f["problems"] else "")
    ]


def _ratio(project, relay) -> str:
    if project is None or relay is None or not relay or math.isnan(project) or math.isnan(relay):
        return "-"
    return f"{project / relay:.2f}x"


def reference_summary(results: dict) -> str:
    """Each stack against the reference relay measured in the same run: project / relay, so
    below 1 the project is the faster or the cheaper (what docs/performance.md's ratio table shows)."""
    ref = results["reference"]
    ref_levels = {x["C"]: x for x in ref.get("concurrency", {}).get("levels", [])}
    ref_tokens = ref.get("concurrency", {}).get("tokens", 0)
    ref_first = (ref.get("first_text") or {}).get("first_text_ms") or {}
    cs = sorted(ref_levels)
    head = "| stack | first text C=1 p50 | " + " | ".join(
        f"C={c} stretch | C={c} first text p95 | C={c} server CPU/1k tokens" for c in cs
    )
    lines = [
        "project / reference relay, same run (below 1: the project is faster or cheaper)",
        head + " |",
        "|" + "---|" * (2 + 3 * len(cs)),
    ]
    rows = [(s["label"], s) for s in results["stacks"]]
    for label, s in rows:
        levels = {x["C"]: x for x in s.get("concurrency", {}).get("levels", [])}
        tokens = s.get("concurrency", {}).get("tokens", 0)
        first = ((s.get("first_text") or {}).get("first_text_ms") or {}).get("p50")
        cells = [_ratio(first, ref_first.get("p50"))]
        for c in cs:
            mine, theirs = levels.get(c), ref_levels[c]
            cells += [
                _ratio(mine and mine["stretch"], theirs["stretch"]),
                _ratio(mine and mine["first_text_ms"]["p95"], theirs["first_text_ms"]["p95"]),
                _ratio(mine and server_cpu_per_1k(mine, tokens), ref_tokens and server_cpu_per_1k(theirs, ref_tokens)),
            ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = [f"{ref_first.get('p50', '-')} ms"]
    for c in cs:
        lv = ref_levels[c]
        # A relay level with streams that did not finish: its wall (and so stretch) is of the ones that did.
        whole = "" if lv["ok"] == c else f" ({lv['ok']}/{c} whole)"
        cells += [
            f"{lv['stretch']}{whole}",
            f"{lv['first_text_ms']['p95']} ms",
            f"{server_cpu_per_1k(lv, ref_tokens)} s",
        ]
    lines.append(f"| {ref['label']} (absolute) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(results: dict) -> str:
    """One line per stack with the headline numbers (what the table of docs/performance.md shows)."""
    head = (
        "| stack | relay ratio | C=200 stretch | C=200 first text p95 | C=400 stretch | "
        "KiB/idle socket | idle CPU | replay 10k | rows/1k tokens (100/s) |"
    )
    lines = [head, "|" + "---|" * 9]
    for s in results["stacks"]:
        lv = {x["C"]: x for x in s.get("concurrency", {}).get("levels", [])}
        c200, c400 = lv.get(200, {}), lv.get(400, {})
        lines.append(
            f"| {s['label']} | {_fmt(s.get('relay', {}).get('ratio'), 'x')} | {_fmt(c200.get('stretch'))} | "
            f"{_fmt(c200.get('first_text_ms', {}).get('p95'), ' ms')} | {_fmt(c400.get('stretch'))} | "
            f"{_fmt(s.get('idle', {}).get('kib_per_socket'))} | {_fmt(s.get('idle', {}).get('idle_cpu_pct'), '%')} | "
            f"{_fmt(s.get('replay', {}).get('sync_s'), ' s')} | "
            f"{_fmt(s.get('writes_paced', {}).get('rows_per_1k_tokens'))} |"
        )
    return "\n".join(lines)


def write(results: dict, path: Path | None = None) -> Path:
    path = path or RESULTS / "latest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    results = {
        **results,
        "machine": {
            "cpus": __import__("os").cpu_count(),
            "python": platform.python_version(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    }
    path.write_text(json.dumps(results, indent=1))
    return path
