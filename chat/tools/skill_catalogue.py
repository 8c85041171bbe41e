"""Skills in the Agent Skills format, disclosed progressively.

AGENT_SKILLS_DIR holds one folder per skill:

    csv-data-summary/
      SKILL.md          YAML front matter (name, description, optional license,
                        compatibility, metadata, allowed-tools) then Markdown instructions
      references/       optional: documents the instructions point to
      scripts/, assets/ optional

The system prompt lists each valid skill's name and description; the tools
`load_skill` and `read_skill_file` (chat/tools/skills.py, built on this module)
return a skill's instructions and its other files. An invalid skill is reported
by a system check (agentsite.W010) and skipped.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

NAME_RE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_SKILL_BYTES = 200_000
KNOWN_FIELDS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path
    body: str
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SkillProblem:
    path: Path
    message: str


def parse_skill_md(text: str) -> tuple[dict, str]:
    """(front matter, body) of a SKILL.md; ValueError saying what is wrong."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ValueError("SKILL.md must start with YAML front matter between '---' lines")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            break
    else:
        raise ValueError("the YAML front matter is not closed by a '---' line")
    try:
        front = yaml.safe_load("".join(lines[1:index]))
    except yaml.YAMLError as exc:
        raise ValueError(f"the front matter is not valid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(front, dict):
        raise ValueError("the front matter must be a YAML mapping with name and description")
    return front, "".join(lines[index + 1 :]).strip()


def validate(front: dict, folder: str) -> list[str]:
    """What is wrong with a skill's front matter (empty: nothing)."""
    problems = []
    name = front.get("name")
    if not isinstance(name, str) or not name:
        problems.append("'name' is missing or not a string")
    else:
        if len(name) > MAX_NAME:
            problems.append(f"'name' is longer than {MAX_NAME} characters")
        if not NAME_RE.fullmatch(name):
            problems.append(
                f"'name' {name!r} must be lowercase letters, digits and single hyphens, not starting or ending with one"
            )
        if name != folder:
            problems.append(f"'name' {name!r} does not match its folder name {folder!r}")
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("'description' is missing or empty")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"'description' is longer than {MAX_DESCRIPTION} characters")
    compatibility = front.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY):
        problems.append(f"'compatibility' must be a string of at most {MAX_COMPATIBILITY} characters")
    metadata = front.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        problems.append("'metadata' must be a mapping")
    unknown = sorted(set(map(str, front)) - KNOWN_FIELDS)
    if unknown:
        problems.append(f"unknown front matter fields: {', '.join(unknown)}")
    return problems


@functools.lru_cache(maxsize=256)
def _parse_file(path: Path, mtime_ns: int, size: int) -> tuple[dict, str]:
    """Parsed once per version of the file: every run lists the skills in its prompt,
    and YAML parsing them each time was a measurable share of a run's start."""
    front, body = parse_skill_md(path.read_text(encoding="utf-8"))
    return front, body


# How old the list of skills in a run's prompt may be. Listing the folder stats every SKILL.md on
# the event loop: at 200 run starts at once that was ~6% of the server's CPU (py-spy, issue 17).
RESCAN_SECONDS = 2.0
_recent: dict[str, tuple[float, tuple[dict[str, Skill], list[SkillProblem]]]] = {}


def discover_recent(skills_dir: Path | str | None) -> tuple[dict[str, Skill], list[SkillProblem]]:
    """`discover`, at most RESCAN_SECONDS old: a skill added or edited shows within that time."""
    key, now = str(skills_dir), time.monotonic()
    found = _recent.get(key)
    if found is None or now - found[0] > RESCAN_SECONDS:
        found = _recent[key] = (now, discover(skills_dir))
    return found[1]


def discover(skills_dir: Path | str | None) -> tuple[dict[str, Skill], list[SkillProblem]]:
    """Valid skills by name, and what is wrong with the others. Never raises for a bad skill."""
    skills: dict[str, Skill] = {}
    problems: list[SkillProblem] = []
    if not skills_dir:
        return skills, problems
    root = Path(skills_dir)
    if not root.is_dir():
        return skills, [SkillProblem(root, "the skills folder does not exist")]
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        skill_md = folder / "SKILL.md"
        if not skill_md.is_file():
            problems.append(SkillProblem(folder, "no SKILL.md in this folder"))
            continue
        try:
            info = skill_md.stat()
            if info.st_size > MAX_SKILL_BYTES:
                raise ValueError(f"SKILL.md is larger than {MAX_SKILL_BYTES} bytes")
            front, body = _parse_file(skill_md, info.st_mtime_ns, info.st_size)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.append(SkillProblem(skill_md, str(exc)))
            continue
        wrong = validate(front, folder.name)
        if wrong:
            problems.append(SkillProblem(skill_md, "; ".join(wrong)))
            continue
        meta = front.get("metadata") or {}
        skills[front["name"]] = Skill(front["name"], " ".join(front["description"].split()), folder, body, meta)
    return skills, problems


def skills_prompt(skills: dict[str, Skill]) -> str:
    """The system prompt's list of skills: names and descriptions only (progressive disclosure)."""
    if not skills:
        return ""
    lines = [
        "Skills are instructions for particular tasks. When the user's request matches a skill's "
        "description, call load_skill with its name first and follow what it says; its other files "
        "can be read with read_skill_file.",
        "<available_skills>",
    ]
    lines += [f"- {skill.name}: {skill.description}" for skill in skills.values()]
    lines.append("</available_skills>")
    return "\n".join(lines)
