"""axe-core's accessibility checks, injected into a page of Debian's chromium.

axe-core comes from the npm registry (tests/ui/package-lock.json, installed by `make axe`, which
`make install-test` runs). It is evaluated through the DevTools protocol, which the page's CSP
(`script-src 'self'`) does not apply to, so the page under test is served exactly as users get it.

`audit(page, name)` checks the page as it stands at both viewports of the UI tests and in both
colour schemes, saves a screenshot of each under artifacts/a11y/, and fails on any serious or
critical violation, listing every one of them; it counts the rules each impact broke (over the
four views), for a table of the states checked.
"""

from __future__ import annotations

from pathlib import Path

from tests.ui.conftest import ROOT

AXE_SOURCE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = ROOT / "artifacts" / "a11y"
BLOCKING = ("serious", "critical")
IMPACTS = ("critical", "serious", "moderate", "minor")
VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
SCHEMES = ("light", "dark")

# The page's own state is what is checked: the run returns the violations only, with the
# elements (selector and the summary axe gives) that each was found on.
RUN_AXE = """async (impacts) => {
  const results = await axe.run(document, {resultTypes: ["violations"]});
  return results.violations
    .filter((v) => impacts.includes(v.impact))
    .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                  nodes: v.nodes.map((n) => ({target: n.target.join(" "), summary: n.failureSummary}))}));
}"""


def axe_source() -> str:
    if not AXE_SOURCE.exists():
        raise AssertionError(f"axe-core is not installed at {AXE_SOURCE}: run `make axe`")
    return AXE_SOURCE.read_text()


def violations(page, impacts: tuple[str, ...] = BLOCKING) -> list[dict]:
    """axe's violations of the given impacts on the page as it is now (axe injected if needed)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # The source is an expression statement, not a function: evaluated as it is.
        page.evaluate(axe_source())
    return page.evaluate(RUN_AXE, list(impacts))


SHOWN_NODES = 4  # a rule broken on every row of a table is named by its first rows


def describe(found: list[dict]) -> str:
    lines = []
    for violation in found:
        nodes = violation["nodes"]
        lines.append(f"{violation['impact']} {violation['id']} ({len(nodes)}): {violation['help']}")
        for node in nodes[:SHOWN_NODES]:
            summary = " ".join(node["summary"].split())
            lines.append(f"    {node['target']}: {summary}")
        if len(nodes) > SHOWN_NODES:
            lines.append(f"    ... and {len(nodes) - SHOWN_NODES} more")
    return "\n".join(lines)


def audit(page, name: str, counts: dict[str, int] | None = None) -> None:
    """No serious or critical violation on `page` at 1280x800 and 390x844, light and dark;
    `counts` gets the number of rules broken at each impact over the four views (failing or not)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    viewport = page.viewport_size
    failures = []
    broken: dict[str, set[str]] = {impact: set() for impact in IMPACTS}
    try:
        for size_name, size in VIEWPORTS.items():
            page.set_viewport_size(size)
            for scheme in SCHEMES:
                page.emulate_media(color_scheme=scheme)
                page.screenshot(path=str(SCREENSHOTS / f"{name}-{size_name}-{scheme}.png"), animations="disabled")
                every = violations(page, IMPACTS)
                for violation in every:
                    broken[violation["impact"]].add(violation["id"])
                found = [violation for violation in every if violation["impact"] in BLOCKING]
                if found:
                    failures.append(
                        f"{name} at {size_name} ({size['width']}x{size['height']}), {scheme}:\n{describe(found)}"
                    )
    finally:
        page.emulate_media(color_scheme="light")
        if viewport:
            page.set_viewport_size(viewport)
    if counts is not None:
        counts.update({impact: len(rules) for impact, rules in broken.items()})
    assert not failures, "axe-core found serious or critical violations:\n" + "\n".join(failures)
