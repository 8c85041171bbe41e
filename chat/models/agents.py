"""The agents users pick per conversation (docs/protocol.md, "Agents")."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

# The environment's configuration (docs/protocol.md, "Configuration") as the API and the events name it: the
# agent of a conversation without a profile. No profile may take the slug.
DEFAULT_AGENT_SLUG = "default"
DEFAULT_AGENT_NAME = "Default"


class AgentProfile(models.Model):
    """A configuration of the agent that users pick per conversation (docs/protocol.md, "Agents"): the
    seeds' ReactAgent builder (name, model, tools, instruction, options, limits) made data.
    chat.agents.profiles turns a row into the AgentConfig a run is built from; the admin form
    (chat.agents.form) refuses what could not run."""

    slug = models.SlugField(max_length=64, unique=True, help_text="What the API and the picker call it.")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True, help_text="Disabled: nobody may pick it or run with it.")
    base_url = models.CharField(
        "base URL", max_length=500, blank=True, default="", help_text="Empty: the server's OPENAI_BASE_URL."
    )
    # The NAME of an environment variable: keys stay in the server's environment, never in the database.
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        default="",
        help_text="Name of the environment variable holding the key (e.g. DEEPSEEK_API_KEY); empty: OPENAI_API_KEY.",
    )
    model = models.CharField(max_length=200)
    vision = models.BooleanField(
        "accepts images",
        default=False,
        help_text="The model takes images: attached ones are sent to it, scaled to AGENT_IMAGE_MAX_PIXELS.",
    )
    system_prompt = models.TextField(blank=True, default="", help_text="Empty: the server's AGENT_SYSTEM_PROMPT.")
    tools = models.JSONField(default=list, blank=True)  # built-in names and MCP `<server>__<tool>` / `<server>__*`
    skills = models.JSONField(default=list, blank=True)  # empty: every skill of AGENT_SKILLS_DIR
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    top_p = models.FloatField("top_p", null=True, blank=True)
    tool_choice = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="auto, none, required, or the name of one of its tools (then called on each run's first "
        "model call); empty: not sent (the endpoint's default, auto). Small local models may call tools only so.",
    )
    context_tokens = models.PositiveIntegerField(
        "context size",
        null=True,
        blank=True,
        help_text="Tokens its model reads at most; older turns are summarized before a request grows past "
        "AGENT_COMPACT_AT of it. Empty: AGENT_CONTEXT_TOKENS.",
    )
    max_iterations = models.PositiveSmallIntegerField(default=10, help_text="Model calls per run.")
    max_retries = models.PositiveSmallIntegerField(default=3, help_text="Retries per model call.")
    retry_interval = models.FloatField(default=10.0, help_text="Seconds between retries.")
    # fnmatch patterns, one per line or comma-separated; empty: AGENT_APPROVAL_TOOLS.
    approval_tools = models.TextField(blank=True, default="")
    everyone = models.BooleanField(default=False, help_text="Every signed-in user may use it.")
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="agent_profiles")
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="agent_profiles")
    # The profiles it may hand a task to, each as a tool `agent__<slug>` (docs/protocol.md, "Sub-agents").
    delegates = models.ManyToManyField("self", symmetrical=False, blank=True, related_name="delegators")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "slug"]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"
