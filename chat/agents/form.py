"""The admin's AgentProfile form: refuses what could not run, with a message on the field at fault.

An unknown tool (neither built in nor `<server>__<tool>` / `<server>__*` of a server in
AGENT_MCP_CONFIG), an unknown skill, an approval pattern that can match no tool name, a key variable that is not set in the server's environment
(or is one of the server's own secrets), a base URL that is not http(s) with a host, a model
option or limit out of range, a tool_choice that names none of its tools, the slug of the default agent,
a delegate it could not hand a task to (chat.agents.delegation).
"""

from __future__ import annotations

from django import forms

from chat.agent.text import clean
from chat.agents import delegation, profiles
from chat.http_urls import http_url_problem
from chat.models import DEFAULT_AGENT_SLUG, AgentProfile


class NameListField(forms.CharField):
    """A list of names typed one per line or separated by commas; stored as a JSON list."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value):
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        return value

    def to_python(self, value) -> list[str]:
        return profiles.split_names(super().to_python(value) or "")


class AgentProfileForm(forms.ModelForm):
    tools = NameListField(
        required=False,
        help_text="Built-in tools (calculator, read_file, ...) and MCP tools as <server>__<tool> or <server>__*. "
        "Empty: this agent has no tools at all (it only answers from its model).",
    )
    skills = NameListField(
        required=False,
        help_text="Skills of AGENT_SKILLS_DIR this agent may load (with the load_skill tool); empty: every skill.",
    )
    approval_tools = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Tools (names or fnmatch patterns such as github__*) whose calls wait for the user's approval; "
        "empty: AGENT_APPROVAL_TOOLS.",
    )

    class Meta:
        model = AgentProfile
        fields = "__all__"

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if slug == DEFAULT_AGENT_SLUG:
            raise forms.ValidationError(f"{DEFAULT_AGENT_SLUG!r} names the server's environment configuration.")
        return slug

    def clean_name(self) -> str:
        return clean(self.cleaned_data["name"].strip())

    def clean_description(self) -> str:
        return clean(self.cleaned_data["description"].strip())

    def clean_system_prompt(self) -> str:
        return clean(self.cleaned_data["system_prompt"].strip())

    def clean_model(self) -> str:
        return clean(self.cleaned_data["model"].strip())

    def clean_base_url(self) -> str:
        url = self.cleaned_data["base_url"].strip()
        if url and (problem := http_url_problem(url)):
            raise forms.ValidationError(f"{url!r} is {problem}.")
        return url

    def clean_api_key_env(self) -> str:
        name = self.cleaned_data["api_key_env"].strip()
        if name and (problem := profiles.key_variable_problem(name)):
            raise forms.ValidationError(f"{problem[0].upper()}{problem[1:]}.")
        return name

    def clean_tools(self) -> list[str]:
        names = self.cleaned_data["tools"]
        problems = [problem for name in names if (problem := profiles.tool_problem(name))]
        if problems:
            raise forms.ValidationError([f"{p[0].upper()}{p[1:]}." for p in problems])
        return names

    def clean_skills(self) -> list[str]:
        names = self.cleaned_data["skills"]
        problems = [problem for name in names if (problem := profiles.skill_problem(name))]
        if problems:
            raise forms.ValidationError([f"{p[0].upper()}{p[1:]}." for p in problems])
        return names

    def clean_approval_tools(self) -> str:
        patterns = profiles.split_names(self.cleaned_data["approval_tools"])
        problems = [problem for pattern in patterns if (problem := profiles.approval_pattern_problem(pattern))]
        if problems:
            raise forms.ValidationError([f"{p[0].upper()}{p[1:]}." for p in problems])
        return ", ".join(patterns)

    def clean_tool_choice(self) -> str:
        return self.cleaned_data["tool_choice"].strip()

    def clean(self):
        data = super().clean()
        choice = data.get("tool_choice")
        if choice and "tools" in data and (problem := profiles.tool_choice_problem(choice, data["tools"])):
            self.add_error("tool_choice", f"{problem[0].upper()}{problem[1:]}.")
        for name in profiles.RANGES:
            if name in data and (problem := profiles.range_problem(name, data[name])):
                self.add_error(name, f"{AgentProfile._meta.get_field(name).verbose_name} {problem}.")
        if data.get("delegates"):
            problems = delegation.delegate_problems(
                self.instance,
                list(data["delegates"]),
                everyone=bool(data.get("everyone")),
                users=list(data.get("users") or []),
                groups=list(data.get("groups") or []),
            )
            if problems:
                self.add_error("delegates", problems)
        return data
