"""Skills: discovery and validation, the listing in the system prompt, load_skill, read_skill_file, the check."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.agent.tools import ToolContext, ToolError
from chat.tools.config import SkillsSettings, ToolSettings
from chat.tools.skill_catalogue import discover, parse_skill_md, skills_prompt
from chat.tools.skills import load_skill, read_skill_file, skill_files

REPO_SKILLS = Path(__file__).resolve().parents[2] / "skills"


def write_skill(root: Path, folder: str, text: str, files: dict[str, str] | None = None) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(text)
    for name, content in (files or {}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    return path


GOOD = "---\nname: {name}\ndescription: Does a thing. Use when asked.\n---\n# Steps\n1. do it\n"


@pytest.fixture
def skills_dir(tmp_path):
    root = tmp_path / "skills"
    root.mkdir()
    write_skill(root, "pdf-tools", GOOD.format(name="pdf-tools"), {"references/guide.md": "# Guide\nread me"})
    return root


@pytest.fixture
def ctx(skills_dir):
    return ToolContext(settings=ToolSettings(skills=SkillsSettings(skills_dir=skills_dir)))


def test_the_shipped_skills_are_valid():
    skills, problems = discover(REPO_SKILLS)
    assert problems == []
    assert {"csv-data-summary", "code-review-checklist", "web-research-brief"} <= set(skills)
    for skill in skills.values():
        assert skill.body.startswith("#") and len(skill.body.splitlines()) < 500
    assert "references/checklist.md" in skill_files(skills["code-review-checklist"])


BROKEN = [
    ("no-front-matter", "# Just markdown\n", "must start with YAML front matter"),
    ("unclosed", "---\nname: unclosed\ndescription: x\n", "not closed"),
    ("bad-yaml", "---\nname: [oops\ndescription: x\n---\n", "not valid YAML"),
    ("not-a-mapping", "---\n- a\n- b\n---\n", "must be a YAML mapping"),
    ("no-name", "---\ndescription: x\n---\n", "'name' is missing"),
    ("no-description", "---\nname: no-description\n---\n", "'description' is missing"),
    ("empty-description", "---\nname: empty-description\ndescription: '  '\n---\n", "'description' is missing"),
    ("long-description", "---\nname: long-description\ndescription: " + "x" * 1025 + "\n---\n", "longer than 1024"),
    ("Upper-Case", "---\nname: Upper-Case\ndescription: x\n---\n", "lowercase letters"),
    ("-leading", "---\nname: -leading\ndescription: x\n---\n", "lowercase letters"),
    ("trailing-", "---\nname: trailing-\ndescription: x\n---\n", "lowercase letters"),
    ("double--hyphen", "---\nname: double--hyphen\ndescription: x\n---\n", "lowercase letters"),
    ("under_score", "---\nname: under_score\ndescription: x\n---\n", "lowercase letters"),
    ("x" * 65, "---\nname: " + "x" * 65 + "\ndescription: x\n---\n", "longer than 64"),
    ("folder-a", "---\nname: folder-b\ndescription: x\n---\n", "does not match its folder"),
    (
        "python-tag",
        "---\nname: !!python/object/apply:os.system ['echo pwned']\ndescription: x\n---\n",
        "not valid YAML",
    ),
    (
        "extra-field",
        "---\nname: extra-field\ndescription: x\ncolour: red\n---\n",
        "unknown front matter fields: colour",
    ),
    ("bad-metadata", "---\nname: bad-metadata\ndescription: x\nmetadata: [1]\n---\n", "'metadata' must be a mapping"),
]


@pytest.mark.parametrize("folder, text, message", BROKEN, ids=[b[0][:20] for b in BROKEN])
def test_broken_skills_are_reported_and_skipped(skills_dir, folder, text, message):
    write_skill(skills_dir, folder, text)
    skills, problems = discover(skills_dir)
    assert list(skills) == ["pdf-tools"]  # the good one still loads
    assert len(problems) == 1 and message in problems[0].message


def test_missing_skill_md_and_missing_folder(tmp_path, skills_dir):
    (skills_dir / "empty-folder").mkdir()
    _skills, problems = discover(skills_dir)
    assert [p.message for p in problems] == ["no SKILL.md in this folder"]
    assert discover(tmp_path / "nope")[1][0].message == "the skills folder does not exist"


def test_prompt_lists_names_and_descriptions_only(skills_dir):
    skills, _ = discover(skills_dir)
    prompt = skills_prompt(skills)
    assert "- pdf-tools: Does a thing. Use when asked." in prompt and "load_skill" in prompt
    assert "1. do it" not in prompt  # the body is disclosed by load_skill only
    assert skills_prompt({}) == ""


async def test_load_skill_returns_the_body_and_lists_files(ctx):
    text = await load_skill("pdf-tools", ctx)
    assert text.startswith("# Skill: pdf-tools") and "1. do it" in text and "- references/guide.md" in text
    assert "description:" not in text


async def test_load_unknown_skill(ctx):
    with pytest.raises(ToolError, match="no skill named 'nope'; available skills: pdf-tools"):
        await load_skill("nope", ctx)


async def test_read_skill_file(ctx, skills_dir, tmp_path):
    assert await read_skill_file("pdf-tools", "references/guide.md", ctx) == "# Guide\nread me"
    (tmp_path / "secret.txt").write_text("SECRET")
    (skills_dir / "pdf-tools" / "references" / "out").symlink_to(tmp_path / "secret.txt")
    for path, message in [
        ("../../secret.txt", "'..' is not allowed"),
        ("/etc/passwd", "absolute path"),
        ("references/out", "symlink"),
        ("references/missing.md", "does not exist"),
    ]:
        with pytest.raises(ToolError, match=message):
            await read_skill_file("pdf-tools", path, ctx)


def test_parse_skill_md_keeps_the_body():
    front, body = parse_skill_md("\ufeff---\nname: a\ndescription: b\n---\n\nBody\n---\nmore\n")
    assert front == {"name": "a", "description": "b"} and body == "Body\n---\nmore"


def test_system_check_reports_broken_skills(settings, skills_dir):
    from chat.checks import check_skills

    write_skill(skills_dir, "Broken", "---\nname: Broken\ndescription: x\n---\n")
    settings.AGENT_SKILLS_DIR = skills_dir
    settings.AGENT_TOOLS = ["load_skill"]
    messages = check_skills(None)
    assert [m.id for m in messages] == ["agentsite.W010"] and "lowercase letters" in messages[0].msg
    settings.AGENT_TOOLS = ["calculator"]
    assert check_skills(None) == []


def test_system_prompt_lists_skills_when_load_skill_is_enabled(settings, skills_dir):
    from chat.runtime.build import system_prompt

    settings.AGENT_SKILLS_DIR = skills_dir
    settings.AGENT_SYSTEM_PROMPT = "Be nice."
    assert system_prompt(["load_skill"]).startswith("Be nice.\n\nSkills are instructions")
    assert "- pdf-tools:" in system_prompt(["load_skill"])
    assert system_prompt(["calculator"]) == "Be nice."


def test_the_prompts_list_of_skills_is_rescanned_after_a_short_while(settings, skills_dir, monkeypatch):
    from chat.runtime.build import system_prompt
    from chat.tools import skill_catalogue as skills

    settings.AGENT_SKILLS_DIR = skills_dir
    before = system_prompt(["load_skill"])
    write_skill(skills_dir, "late-skill", "---\nname: late-skill\ndescription: Added later.\n---\nBody.\n")
    assert system_prompt(["load_skill"]) == before  # a run start does not list the folder each time
    clock = skills.time.monotonic() + skills.RESCAN_SECONDS + 1
    monkeypatch.setattr(skills.time, "monotonic", lambda: clock)
    assert "- late-skill: Added later." in system_prompt(["load_skill"])
