"""The Markdown tables of docs/performance.md, each from its block's source (bench/docs.py): the
part of a results file it shows, with the run's `run` entry (bench/runinfo.py).

A block is a `Block`: `take(results)` is its source from a results file (None when the file has
no figures for it), `render(source)` its table, raising MissingFigure with the figure's path
when the source lacks one. Every table is followed by the line that says which run made it and
how busy the machine was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .procs import server_cpu_per_1k
from .report import _ratio

STACK_TITLES = {
    "sqlite-daphne": "SQLite + in-memory, 1 daphne",
    "sqlite-uvicorn": "SQLite + in-memory, 1 uvicorn",
    "pg-redis-2daphne": "PostgreSQL + Redis, 2 daphne",
    "pg-redis-2uvicorn": "PostgreSQL + Redis, 2 uvicorn",
}
DOOR_TITLES = {
    "websocket": "WebSocket",
    "v1": "`/v1` streaming",
    "responses": "`/v1/responses` streaming",
    "sse": "SSE + `POST .../messages/`",
    "agui": "AG-UI `POST /api/agui/<slug>/`",
    "mcp": "MCP `tools/call` (`/mcp`, progress)",
    "a2a": "A2A `SendStreamingMessage`",
}
SUITE_FIGURES = ("relay", "concurrency", "idle", "replay")  # a whole suite's run, not a part of one


class MissingFigure(ValueError):
    pass


def figure(data: dict, path: str):
    """data at a dotted path ("idle.kib_per_socket", "levels.0.C"); MissingFigure names it."""
    value = data
    for key in path.split("."):
        try:
            value = value[int(key)] if isinstance(value, list) else value[key]
        except (KeyError, IndexError, TypeError, ValueError):
            raise MissingFigure(f"no {path}") from None
    return value


def seconds(ms: float) -> str:
    """612 -> '0.61 s', 1600 -> '1.6 s', 11600 -> '11.6 s'."""
    s = ms / 1000
    text = f"{s:.2f}" if s < 10 else f"{s:.1f}"
    return text.rstrip("0").rstrip(".") + " s"


def millis(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:,.0f} ms"


def _row(cells: list[str]) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [_row(head), "|" + "---|" * len(head)] + [_row(r) for r in rows]


def run_line(source: dict) -> str:
    run = source["run"]
    said = f"Run: `{run['command']}` at {run['commit']}, {run['started']}"
    if run.get("elapsed_s") is not None:
        said += f", {run['elapsed_s']:g} s"
    load = run["load"]
    if "note" in load:  # a run from before the bench recorded the machine's load
        said += f"; {load['note']}"
    else:
        said += (
            f"; load average {load['loadavg_before']:g} before, {load['loadavg_after']:g} after "
            f"({load['cpus']} cores); other processes used {load['others_cpu_s']:g} CPU s "
            f"({load['others_cores']:g} cores on average), the bench's own {load['bench_cpu_s']:g}"
        )
    said += "."
    if source.get("transcribed"):
        said += f" {source['transcribed']}"
    return said


# -- latest: the suite's headline figures per stack ----------------------------------------------


def _stacks_with(results: dict, *keys: str) -> list[dict]:
    return [s for s in results.get("stacks", []) if all(k in s for k in keys)]


def take_latest(results: dict) -> dict | None:
    stacks = _stacks_with(results, *SUITE_FIGURES)
    return {"stacks": stacks} if stacks else None


def _level(stack: dict, c: int) -> dict:
    return next((lv for lv in stack["concurrency"]["levels"] if lv["C"] == c), {})


def render_latest(source: dict) -> list[str]:
    head = [
        "stack",
        "relay ratio",
        "C=200 stretch",
        "C=200 first text p95",
        "C=400 stretch",
        "KiB per idle socket",
        "idle CPU",
        "replay 10k",
        "rows/1k tokens (full speed / 100 per s)",
    ]
    rows = []
    for s in source["stacks"]:
        c200, c400 = _level(s, 200), _level(s, 400)
        rows.append(
            [
                STACK_TITLES.get(s["name"], s["label"]),
                f"{figure(s, 'relay.ratio'):.2f}x",
                f"{c200['stretch']:.2f}" if c200 else "-",
                seconds(c200["first_text_ms"]["p95"]) if c200 else "-",
                f"{c400['stretch']:.2f}" if c400 else "-",
                f"{figure(s, 'idle.kib_per_socket'):.1f}",
                f"{figure(s, 'idle.idle_cpu_pct'):.1f}%",
                f"{figure(s, 'replay.sync_s'):.2f} s",
                f"{figure(s, 'writes_fast.rows_per_1k_tokens'):g} / {figure(s, 'writes_paced.rows_per_1k_tokens'):g}",
            ]
        )
    return _table(head, rows)


# -- reference: the project against the minimal relay --------------------------------------------

STRETCH_AT, P95_AT, CPU_AT = (50, 200, 400), (200, 400), 200


def take_reference(results: dict) -> dict | None:
    project = [s for s in _stacks_with(results, "concurrency", "first_text") if s["name"] == "sqlite-daphne"]
    if "concurrency" not in results.get("reference", {}) or not project:
        return None
    return {"project": project[0], "reference": results["reference"]}


def _reference_cells(side: dict) -> list:
    """The figures of one row: first text, model's first token, stretches, p95s (ms), CPU per 1k tokens."""
    levels = {lv["C"]: lv for lv in figure(side, "concurrency.levels")}
    tokens = figure(side, "concurrency.tokens")
    return [
        figure(side, "first_text.first_text_ms.p50"),
        figure(side, "first_text.model_first_token_ms.p50"),
        *[levels[c]["stretch"] if c in levels else None for c in STRETCH_AT],
        *[levels[c]["first_text_ms"]["p95"] if c in levels else None for c in P95_AT],
        server_cpu_per_1k(levels[CPU_AT], tokens) if CPU_AT in levels else None,
    ]


def render_reference(source: dict) -> list[str]:
    head = [
        "",
        "first text, one stream (p50)",
        *[f"C={c} stretch" for c in STRETCH_AT],
        *[f"C={c} first text p95" for c in P95_AT],
        f"server CPU per 1k tokens, C={CPU_AT}",
    ]
    mine, theirs = _reference_cells(source["project"]), _reference_cells(source["reference"])

    def row(title: str, cells: list) -> list[str]:
        first, model, *rest = cells
        n = len(STRETCH_AT)
        return [
            title,
            f"{first:.1f} ms (model's first token {model:.1f} ms)",
            *["-" if v is None else f"{v:.2f}" for v in rest[:n]],
            *["-" if v is None else seconds(v) for v in rest[n : n + len(P95_AT)]],
            "-" if rest[-1] is None else f"{rest[-1]:.3f} s",
        ]

    ratios = [_ratio(a, b) if a is not None and b is not None else "-" for a, b in zip(mine, theirs)]
    ratios.pop(1)  # the model's first token is no figure of theirs or ours
    project = STACK_TITLES["sqlite-daphne"]
    return _table(
        head,
        [
            row(f"project, {project}", mine),
            row("relay, no persistence, 1 daphne", theirs),
            ["**project / relay**"] + [f"**{r}**" if r != "-" else r for r in ratios],
        ],
    )


# -- bursts: a burst's first text, the project and the relay in turn ------------------------------


def take_bursts(results: dict) -> dict | None:
    bursts = results.get("bursts")
    return {"bursts": bursts} if bursts and bursts.get("levels") else None


def render_bursts(source: dict) -> list[str]:
    rows = []
    for level in figure(source, "bursts.levels"):
        v = figure(level, "verdict")
        rows.append(
            [
                f"C = {level['C']}",
                ", ".join(f"{b['first_text_p50_ms']:.0f}" for b in level["project"]),
                ", ".join(f"{b['first_text_p50_ms']:.0f}" for b in level["relay"]),
                f"{millis(v['project_median_ms'])} / {millis(v['relay_median_ms'])}",
                f"**{v['ratio']:.2f}x**",
                f"{v['rounds_no_later']} of {v['rounds']}",
                "yes" if v["whole"] else "**no**",
            ]
        )
    head = [
        "burst",
        "project: each burst's first text p50 (ms)",
        "relay's, in the same rounds",
        "median, project / relay",
        "project / relay",
        "rounds the project was no later",
        "every stream whole",
    ]
    return _table(head, rows)


# -- peers: the project, the relay and Chainlit with and without its data layer, in turn ----------

PEER_TITLES = {"project": f"project, {STACK_TITLES['sqlite-daphne']}", "relay": "relay, no persistence, 1 daphne"}


def take_peers(results: dict) -> dict | None:
    peers = results.get("peers")
    return {"peers": peers} if peers and peers.get("levels") else None


def _against(value: float, project: float, side: str, cell: str) -> str:
    """A peer's cell with the project's figure over its own (below 1: the project's is smaller)."""
    return cell if side == "project" else f"{cell} ({_ratio(project, value)})"


def render_peers(source: dict) -> list[str]:
    peers = source["peers"]
    titles = {side: PEER_TITLES.get(side, label) for side, label in figure(peers, "labels").items()}
    rows = []
    for level in figure(peers, "levels"):
        summary = figure(level, "summary")
        mine = summary["project"]
        for side, s in summary.items():
            rows.append(
                [
                    f"C = {level['C']}",
                    titles[side],
                    _against(
                        s["first_text_p50_ms"],
                        mine["first_text_p50_ms"],
                        side,
                        f"{s['first_text_p50_ms']:,.0f} / {s['first_text_p95_ms']:,.0f} ms",
                    ),
                    _against(s["stretch"], mine["stretch"], side, f"{s['stretch']:.2f}"),
                    _against(
                        s["server_cpu_per_1k_s"], mine["server_cpu_per_1k_s"], side, f"{s['server_cpu_per_1k_s']:.3f} s"
                    ),
                    "yes" if s["whole"] else "**no**",
                ]
            )
    head = [
        "burst",
        "server",
        "first text p50 / p95 (the project's p50 over this)",
        "stretch (the project's over this)",
        "server CPU per 1k tokens (the project's over this)",
        "every stream whole",
    ]
    table = _table(head, rows)
    idle = peers.get("idle") or {}
    if idle:
        mine = figure(idle, "project.kib_per_socket")
        table += [""] + _table(
            [
                "server",
                f"KiB per idle socket ({idle['project']['sockets']:,} sockets; the project's over this)",
                "idle CPU",
            ],
            [
                [
                    titles[side],
                    _against(i["kib_per_socket"], mine, side, f"{i['kib_per_socket']:.1f}"),
                    f"{i['idle_cpu_pct']:.1f}%",
                ]
                for side, i in idle.items()
            ],
        )
    return table


# -- doors: first text through the WebSocket and each HTTP door ----------------------------------------


def take_doors(results: dict) -> dict | None:
    stacks = [{"name": s["name"], "label": s["label"], "doors": s["doors"]} for s in _stacks_with(results, "doors")]
    return {"stacks": stacks} if stacks else None


def render_doors(source: dict) -> list[str]:
    stacks = source["stacks"]
    levels = sorted({row["C"] for s in stacks for row in figure(s, "doors.levels")})
    top = levels[-1]
    head = (["stack"] if len(stacks) > 1 else []) + ["door"]
    for c in levels:
        head += [
            f"C={c} first text p50{' / p95' if _has_p95(stacks) else ''} (against the WebSocket)",
            f"C={c} stretch",
            f"C={c} server CPU per 1k tokens",
        ]
    head.append(f"answered at C={top} (p50)")
    rows = []
    for s in stacks:
        by = {(row["door"], row["C"]): row for row in s["doors"]["levels"]}
        for door in DOOR_TITLES:
            if not any(d == door for d, _ in by):
                continue
            cells = [STACK_TITLES.get(s["name"], s["label"])] if len(stacks) > 1 else []
            cells.append(DOOR_TITLES[door])
            for c in levels:
                row, socket = by.get((door, c)), by.get(("websocket", c))
                stretch = (row or {}).get("stretch")
                cells += [_door_cell(row, socket), "-" if stretch is None else f"{stretch:.2f}"]
                cells.append(
                    f"{server_cpu_per_1k(row, s['doors']['tokens']):.3f} s" if row and row.get("cpu_s") else "-"
                )
            answered = (by.get((door, top)) or {}).get("answered_ms")
            cells.append("-" if answered is None else millis(answered))
            rows.append(cells)
    return _table(head, rows)


def _has_p95(stacks: list[dict]) -> bool:
    return all("p95" in row["first_text_ms"] for s in stacks for row in s["doors"]["levels"])


def _door_cell(row: dict | None, socket: dict | None) -> str:
    if row is None:
        return "-"
    ft = row["first_text_ms"]
    text = f"{millis(ft['p50']).removesuffix(' ms')}" + (f" / {millis(ft['p95'])}" if "p95" in ft else " ms")
    if socket is not None and row["door"] != "websocket":
        text += f" ({_ratio(ft['p50'], socket['first_text_ms']['p50'])})"
    if row["ok"] != row["C"]:
        text += f", {row['ok']}/{row['C']} whole"
    return text


# -- idle10k: 10,000 idle sockets and the reconnect storm (bench/idle_scale.py) -------------------


def take_idle10k(results: dict) -> dict | None:
    found = results.get("idle10k")
    return {"idle10k": found} if found and "storm" in found and "error" not in found else None


def _kinds(per: dict, top: int = 5) -> str:
    """The statements that make up a count, in brackets, leaving out the background's few (the
    process gauge's); nothing when every kind is under 0.05."""
    kinds = ", ".join(f"{kind} {n:g}" for kind, n in list(per["by_kind"].items())[:top] if n >= 0.05)
    return f" ({kinds})" if kinds else ""


def _storm_rows(sockets: int, s: dict) -> list[list[str]]:
    if s["sync_s"]:
        synced = (
            f"p50 {seconds(1000 * s['sync_s']['p50'])}, p95 {seconds(1000 * s['sync_s']['p95'])}, the last at "
            f"{seconds(1000 * s['total_s'])} "
            f"({s['reconnected']:,} of {sockets:,})"
        )
    else:
        synced = f"none of {sockets:,} within {s['deadline_s']} s"
    attempts = ", ".join(f"{k} for {n:,}" for k, n in s["attempts"].items())
    errors = ", ".join(f"{k} {n:,}" for k, n in s["errors"].items()) or "none"
    per_reconnect = s["queries_per_reconnect"]
    return [
        ["reconnect storm: every socket with `after` after the page's first wait, until its `sync`", synced],
        ["synced by then", ", ".join(f"{t}: {n:,}" for t, n in s["synced_by"].items())],
        ["handshake attempts per socket", f"{attempts}; failed attempts {s['failed_attempts']:,} ({errors})"],
        [
            "queries per attempt (and per socket synced)",
            f"{s['queries_per_attempt']['queries']:g}{_kinds(s['queries_per_attempt'])}"
            + (f"; {per_reconnect['queries']:g} per socket synced" if per_reconnect else ""),
        ],
        [
            "server CPU in the storm",
            f"{s['server_cpu_s']:g} s"
            + (f" ({s['server_cpu_ms_per_reconnect']:g} ms per socket synced)" if s["reconnected"] else "")
            + f"; the client {s['client_cpu_s']:g} s",
        ],
    ]


def render_idle10k(source: dict) -> list[str]:
    r = source["idle10k"]
    c, m, i, s = (figure(r, k) for k in ("connect", "memory", "idle", "storm"))
    rows = [
        ["sockets", f"{r['sockets']:,}, each on a conversation of its own with {r['history_events']} events"],
        [
            "opening them, 50 at a time",
            f"{c['seconds']:g} s ({c['per_s']:g} a second); server CPU {c['server_cpu_ms_per_connect']:g} ms "
            f"and {c['queries_per_connect']['queries']:g} queries each",
        ],
        [
            "server memory",
            f"RSS {m['rss_before_mib']:g} -> {m['rss_after_mib']:g} MiB: {m['kib_per_socket']:.1f} KiB per socket",
        ],
        ["server CPU idle, no client frames", f"{i['quiet_cpu_pct']:.1f}% of a core (over {i['quiet_seconds']:g} s)"],
        [
            f"server CPU idle, a ping per socket every {i['ping_every_s']:g} s",
            f"{i['cpu_pct']:.1f}% of a core (over {i['ping_seconds']:g} s, {i['pings']:,} pings): "
            f"{i['cpu_ms_per_ping']:g} ms and {i['queries_per_ping']['queries']:g} queries per ping"
            f"{_kinds(i['queries_per_ping'])}",
        ],
        ["restart: SIGTERM until it answers again", f"{r['restart_s']:g} s"],
        *_storm_rows(r["sockets"], s),
    ]
    return _table(["figure", "value"], rows)


# -- model-tls: a model call's first text over TLS, warm connection or new (bench/model_tls.py) ---


def take_model_tls(results: dict) -> dict | None:
    found = results.get("model_tls")
    return {"model_tls": found} if found and "error" not in found else None


def render_model_tls(source: dict) -> list[str]:
    r = source["model_tls"]

    def cell(endpoint: str, variant: str) -> str:
        ft = figure(r, f"{endpoint}.{variant}.first_text_ms")
        return f"{ft['p50']:.1f} / {ft['p95']:.1f} ms"

    def opened(variant: str) -> str:
        return f"{r['tls'][variant]['connections_opened']} / {r['plain'][variant]['connections_opened']}"

    def cost(endpoint: str) -> str:
        warm, new = (figure(r, f"{endpoint}.{v}.first_text_ms.p50") for v in ("warm", "new"))
        return f"+{new - warm:.1f} ms"

    head = [f"connection ({r['calls']} calls each)", "TLS: first text p50 / p95", "plain HTTP", "connections opened"]
    return _table(
        head,
        [
            ["kept and reused (one client)", cell("tls", "warm"), cell("plain", "warm"), opened("warm")],
            ["new for each call (a client each)", cell("tls", "new"), cell("plain", "new"), opened("new")],
            ["a new connection's cost (p50)", cost("tls"), cost("plain"), ""],
        ],
    )


# -- soak: two daphnes under mixed load, sampled (bench/soak.py) --------------------------------

# A figure of each process (key_0, key_1) and its label; memory has a slope per 10-minute window.
SOAK_PER_PROCESS = {
    "rss_mb": "RSS, MB",
    "heap_mb": "of it malloc's main heap ([heap]), MB",
    "anon_mb": "of it other anonymous mappings, MB",
    "file_mb": "of it files' mappings, MB",
    "fds": "open fds",
    "lag_ms": "event-loop lag (a ping's round trip), ms",
}
SOAK_SHARED = {"db_connections": "database connections (both)", "redis_channels": "Redis channels subscribed"}


def take_soak(results: dict) -> dict | None:
    if "samples" not in results or "figures" not in results:
        return None
    keep = ("duration_s", "allocator", "process_env", "operations", "errors", "figures")
    return {"soak": {key: results[key] for key in keep if key in results}}


def _signed(value: float) -> str:
    return f"{value + 0.0:+g}"  # + 0.0: a slope that rounded to -0.0 reads +0


def _both(fig: tuple[dict, dict], key: str, signed: bool = False) -> str:
    a, b = (f[key] for f in fig)
    return f"{_signed(a)} / {_signed(b)}" if signed else f"{a:g} / {b:g}"


def _windows(fig: tuple[dict, dict]) -> str:
    a, b = (f.get("window_slopes_per_hour", []) for f in fig)
    return ", ".join(f"{_signed(x)} / {_signed(y)}" for x, y in zip(a, b)) or "-"


def render_soak(source: dict) -> list[str]:
    soak = source["soak"]
    figures = soak["figures"]
    rows = []
    for key, label in SOAK_PER_PROCESS.items():
        if f"{key}_0" not in figures:
            continue
        fig = (figures[f"{key}_0"], figures[f"{key}_1"])
        slopes = _windows(fig) if key.endswith("_mb") else "-"
        rows.append(
            [
                label,
                _both(fig, "first"),
                _both(fig, "last"),
                _both(fig, "max"),
                _both(fig, "slope_per_hour", True),
                slopes,
            ]
        )
    for key, label in SOAK_SHARED.items():
        if key in figures:
            f = figures[key]
            rows.append(
                [label, f"{f['first']:g}", f"{f['last']:g}", f"{f['max']:g}", _signed(f["slope_per_hour"]), "-"]
            )
    head = [
        "figure (process A / B)",
        "first",
        "last",
        "max",
        "slope per hour, second half",
        "slope per hour, each 10 minutes",
    ]
    operations = soak["operations"]
    done = ", ".join(f"{name} {count:,}" for name, count in sorted(operations.items(), key=lambda kv: -kv[1]))
    errors = soak["errors"]
    setting = "; ".join(soak.get("process_env", [])) or "none"
    return _table(head, rows) + [
        "",
        f"{soak['duration_s']:g} s of load; allocator {soak.get('allocator', 'glibc')}, per-process settings: "
        f"{setting}. Operations: {sum(operations.values()):,} ({done}). "
        + (f"Errors: {', '.join(f'{k} {v}' for k, v in errors.items())}." if errors else "Errors: none."),
    ]


@dataclass(frozen=True)
class Block:
    take: Callable[[dict], dict | None]
    render: Callable[[dict], list[str]]


BLOCKS: dict[str, Block] = {
    "latest": Block(take_latest, render_latest),
    "reference": Block(take_reference, render_reference),
    "bursts": Block(take_bursts, render_bursts),
    "peers": Block(take_peers, render_peers),
    "doors": Block(take_doors, render_doors),
    "idle10k": Block(take_idle10k, render_idle10k),
    "model-tls": Block(take_model_tls, render_model_tls),
    "soak": Block(take_soak, render_soak),
}
