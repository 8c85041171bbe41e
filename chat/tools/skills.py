"""`load_skill`, `read_skill_file`: a skill's instructions and its other files (chat.tools.skill_catalogue finds the skills).

The skills folder comes from the run's SkillsSettings (chat.tools.config); a skill's
files are read through chat.tools.confine, confined to the skill's own folder.
"""

from __future__ import annotations

from chat.agent.tools import ToolContext, ToolError
from chat.tools.config import settings_of
from chat.tools.confine import Confined
from chat.tools.skill_catalogue import Skill, discover

MAX_FILE_CHARS = 30_000


def skill_files(skill: Skill) -> list[str]:
    """The skill's other files, relative to its folder."""
    entries, _cut = Confined(skill.path, label="skill").entries(".", limit=200)
    return [rel for rel, _size, _mtime, is_dir in entries if not is_dir and rel != "SKILL.md"]


def _skill(name: str, context: ToolContext) -> Skill:
    config = settings_of(context).skills
    skills, _problems = discover(config.skills_dir)
    if config.only is not None:  # a skill the profile does not enable is unknown to its runs
        skills = {key: skill for key, skill in skills.items() if key in config.only}
    if name not in skills:
        available = ", ".join(skills) or "none"
        raise ToolError(f"no skill named {name!r}; available skills: {available}")
    return skills[name]


async def load_skill(name: str, context: ToolContext) -> str:
    """Load a skill's full instructions by its name (as listed in the system prompt)."""
    skill = _skill(name.strip(), context)
    files = skill_files(skill)
    text = f"# Skill: {skill.name}\n\n{skill.body}"
    if files:
        text += "\n\nFiles of this skill (read them with read_skill_file):\n" + "\n".join(f"- {f}" for f in files)
    return text


async def read_skill_file(name: str, path: str, context: ToolContext) -> str:
    """Read one file of a skill, such as references/checklist.md, by the skill's name and the file's path."""
    skill = _skill(name.strip(), context)
    data, size = Confined(skill.path, label="skill").read_bytes(path, limit=MAX_FILE_CHARS * 4)
    if b"\x00" in data:
        raise ToolError(f"{path!r} is a binary file")
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_FILE_CHARS or size > len(data):
        text = text[:MAX_FILE_CHARS] + "\n[... truncated]"
    return text
