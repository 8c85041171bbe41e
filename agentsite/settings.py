"""Settings for agentsite, read from the environment (docs/protocol.md, "Configuration")."""

import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from agentsite.env import (
    database_from_url,
    env_bool,
    env_json,
    env_list,
    env_number,
    env_number_map,
    env_optional,
)

# The tools' defaults live in their settings dataclasses (Django-free); the environment overrides them.
# Lowercase: not a Django setting itself.
from chat.agent import compaction as compaction_defaults  # its DEFAULT_PROMPT
from chat.tools.config import DEFAULTS as tool_defaults

BASE_DIR = Path(__file__).resolve().parent.parent

_DEV_SECRET_KEY = "dev-insecure-agentsite-key-change-me"  # noqa: S105 - accepted only with DEBUG on


DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """SECRET_KEY, else the key file `make run` writes, else (DEBUG on only) the development key.
    Without DEBUG the server refuses to start: the development key is public, and anyone
    holding it can forge sessions."""
    if key := env_optional("SECRET_KEY"):
        return key
    key_file = Path(os.environ.get("SECRET_KEY_FILE") or BASE_DIR / ".secret_key")
    if key_file.is_file() and (key := key_file.read_text().strip()):
        return key
    if DEBUG:
        return _DEV_SECRET_KEY
    # One line, no traceback (SystemExit): the operator sees what to set.
    sys.exit(
        "agentsite: SECRET_KEY is not set and DEBUG is off: set SECRET_KEY to a long random value "
        "(python -c 'import secrets; print(secrets.token_urlsafe(50))'), or DEBUG=true for development."
    )


SECRET_KEY = _secret_key()
# The ASGI application checks the database and the system checks before it serves (agentsite.startup);
# a test suite that imports it to drive it in-process turns this off (tests/settings.py).
CHECK_BEFORE_SERVING = True
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1")
# Origins (scheme://host[:port]) besides the server's own that may open WebSockets (agentsite.origins).
ALLOWED_ORIGINS = env_list("ALLOWED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "chat",
    "axes",
]

# Django's own middleware and WhiteNoise as serving.loop_middleware runs them: on daphne's event
# loop, a thread only for what blocks (every one here must be able to run in async mode). Django's
# deployment checks see them as Django's classes (chat.checks); see SILENCED_SYSTEM_CHECKS.
MIDDLEWARE = [
    # /healthz answered whatever the Host (Kubernetes' probes send the pod's address: serving/probe_host.py).
    "serving.probe_host.ProbeAnyHostMiddleware",
    # First: believes X-Forwarded-For/-Proto from TRUSTED_PROXIES only, before anything reads them.
    "serving.proxy.TrustedProxyMiddleware",
    "serving.loop_middleware.SecurityMiddleware",
    # Serves /static/ from the app's own process (daphne serves no files), with
    # far-future caching for hashed names; no web server needed in front.
    "serving.loop_middleware.WhiteNoiseMiddleware",
    "chat.doors.pages.csp.ContentSecurityPolicyMiddleware",
    "serving.loop_middleware.SessionMiddleware",
    "serving.loop_middleware.LocaleMiddleware",
    "serving.loop_middleware.CommonMiddleware",
    "serving.loop_middleware.CsrfViewMiddleware",
    "serving.loop_middleware.AuthenticationMiddleware",
    # Authorization: Bearer on /api/, instead of the session and CSRF (chat/accounts/bearer.py).
    "chat.accounts.bearer.BearerTokenMiddleware",
    # The language saved on the account wins over the browser's (chat/doors/pages/language.py).
    "chat.doors.pages.language.AccountLanguageMiddleware",
    "serving.loop_middleware.MessageMiddleware",
    "serving.loop_middleware.XFrameOptionsMiddleware",
    # Last, as django-axes requires: turns a refused (locked-out) sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Django's "not in your MIDDLEWARE" deployment warnings, which look for its classes by dotted name:
# the chain runs subclasses of them, and chat.checks runs Django's checks of their settings.
SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003", "security.W010", "security.W013"]

ROOT_URLCONF = "agentsite.urls"
ASGI_APPLICATION = "agentsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "chat.doors.pages.context_processors.agent",
                "chat.doors.pages.theme.theme",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        # Persistent: Channels closes "old" connections after every consumer message, and
        # with max age 0 each socket's doorbell made the ORM thread reconnect.
        conn_max_age=600,
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Runs write from several threads of one process; WAL lets readers go on while
    # a writer commits, and the busy timeout makes writers queue instead of failing
    # (those of another process: this one's take turns by a lock, agentsite/sqlite/base.py).
    DATABASES["default"]["ENGINE"] = "agentsite.sqlite"
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not Django's shared-cache memory database, whose table locks ignore the busy
    # timeout; one per process, so that concurrent test runs never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"agentsite_test_{os.getpid()}.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# The calendar of budget periods, of GET /api/usage/ and of the daily quota (docs/protocol.md, "Budgets").
TIME_ZONE = os.environ.get("TIME_ZONE", "").strip() or "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Only for deployments that run collectstatic; by default files are served straight
# from static/ (the finders), so `make run` needs no collectstatic step.
STATIC_ROOT = os.environ.get("STATIC_ROOT") or None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Database sessions whose rows name their user: "sign out of all other sessions" (chat.accounts.sessions).
SESSION_ENGINE = "chat.accounts.sessions"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# Under /api/ and /v1/ a missing CSRF token is refused in the API's JSON shapes (chat.doors.errors).
CSRF_FAILURE_VIEW = "chat.doors.errors.csrf_failure"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Channel layer: the doorbell that tells sockets a new event row exists.
# One process's (no REDIS_URL): one doorbell per flush window per stream; a reader that falls
# this far behind refills from the database, so dropping is safe. The sockets' channel
# (chat/realtime/hub.py) takes every doorbell of the process, and is emptied at once.
IN_MEMORY_CHANNEL_LAYER = {
    "BACKEND": "chat.realtime.layers.InMemoryChannelLayer",
    "CONFIG": {"capacity": 1000, "expiry": 60, "channel_capacity": {"sockets.*": 100_000}},
}
REDIS_URL = env_optional("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Plain pub/sub: group_send is one PUBLISH instead of a Lua script over
            # every member channel, and nothing piles up for a dead consumer.
            # Why this class and these numbers: see docs/deployment.md, "Channel layer".
            # Its subclass subscribes while Redis is away (chat/realtime/redis_layer.py).
            "BACKEND": "chat.realtime.redis_layer.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": IN_MEMORY_CHANNEL_LAYER}

# --- The agent ----------------------------------------------------------------
OPENAI_API_KEY = env_optional("OPENAI_API_KEY")
OPENAI_BASE_URL = env_optional("OPENAI_BASE_URL")
AGENT_MODEL = env_optional("AGENT_MODEL") or ("demo" if not OPENAI_API_KEY else None)
AGENT_MAX_RETRIES = env_number("AGENT_MAX_RETRIES", "3")
AGENT_RETRY_INTERVAL = env_number("AGENT_RETRY_INTERVAL", "10", float)
# The longest wait before a retry that an endpoint's Retry-After header may ask for.
AGENT_RETRY_AFTER_MAX = env_number("AGENT_RETRY_AFTER_MAX", "60", float)
AGENT_MAX_ITERATIONS = env_number("AGENT_MAX_ITERATIONS", "10")
AGENT_TEMPERATURE = env_optional("AGENT_TEMPERATURE")
AGENT_MAX_TOKENS = env_optional("AGENT_MAX_TOKENS")
AGENT_TOP_P = env_optional("AGENT_TOP_P")
AGENT_TOOLS = env_list("AGENT_TOOLS", "calculator,current_time,read_file,write_file,list_files,load_skill")
AGENT_SKILLS_DIR = Path(os.environ.get("AGENT_SKILLS_DIR", str(BASE_DIR / "skills")))
AGENT_WORKSPACE_ROOT = Path(os.environ.get("AGENT_WORKSPACE_ROOT", str(BASE_DIR / "workspaces")))
AGENT_MAX_MESSAGE_CHARS = env_number("AGENT_MAX_MESSAGE_CHARS", "32000")
AGENT_STREAM_FLUSH_MS = env_number("AGENT_STREAM_FLUSH_MS", "50")
# The longest coalescing window: a stream's windows double from AGENT_STREAM_FLUSH_MS up to it
# (chat/runtime/sink.py); at most AGENT_STREAM_FLUSH_MS keeps every window that short.
AGENT_STREAM_FLUSH_MAX_MS = env_number("AGENT_STREAM_FLUSH_MAX_MS", "500")
# Largest conversation file POST /api/conversations/import/ accepts (over it: 413).
AGENT_MAX_IMPORT_BYTES = env_number("AGENT_MAX_IMPORT_BYTES", "10485760")
# Largest file POST /api/conversations/<id>/files/ accepts (over it: 413); all of a conversation's
# files together are held to AGENT_WORKSPACE_MAX_BYTES, the tools' workspace quota.
AGENT_MAX_UPLOAD_BYTES = env_number("AGENT_MAX_UPLOAD_BYTES", "10485760")
# The model of the default agent accepts images (docs/protocol.md, "Images"); a profile has its own switch.
AGENT_VISION = env_bool("AGENT_VISION", False)
# The box an image is scaled down into before a model is sent it, WIDTHxHEIGHT (ratio kept, never enlarged).
AGENT_IMAGE_MAX_PIXELS = os.environ.get("AGENT_IMAGE_MAX_PIXELS", "1568x1568")
# Most pixels (width x height, as its header claims) an image may have to be decoded at all: an
# upload or a /v1 image over it is refused (400) before anything decodes it. Decoding takes 3-4
# bytes a pixel: 50 megapixels pass a 20-megapixel phone photo and an 8K frame, and cost ~200 MB.
AGENT_IMAGE_MAX_INPUT_PIXELS = env_number("AGENT_IMAGE_MAX_INPUT_PIXELS", "50000000")
# Images one server process decodes at once (thumbnails, what a model is sent); the others wait.
AGENT_IMAGE_DECODES = env_number("AGENT_IMAGE_DECODES", "2")
# Open WebSockets and SSE streams, together, one user may hold in one server process (0: no
# cap); over it: a socket is closed 4429, a stream answered 429 (chat.accounts.sockets).
AGENT_MAX_SOCKETS_PER_USER = env_number("AGENT_MAX_SOCKETS_PER_USER", "20")
# Bytes a connection keeps for a client that has not read them (serving.send_buffer): a send
# past it waits until the client has taken them (0: no bound).
AGENT_SEND_BUFFER_BYTES = env_number("AGENT_SEND_BUFFER_BYTES", "262144")
# Live event batches a socket or SSE stream keeps while its client has not taken what came
# before (chat.realtime.backlog); past it the client is a slow consumer: closed 4008, or sent
# `SLOW_CONSUMER`, to resume from the event log.
AGENT_SEND_BACKLOG = env_number("AGENT_SEND_BACKLOG", "1000")
# Seconds a slow consumer has to read what was queued for it, its reason last, before its
# connection is dropped (serving.send_buffer).
AGENT_SLOW_CONSUMER_GRACE_SECONDS = env_number("AGENT_SLOW_CONSUMER_GRACE_SECONDS", "30", float)
# Seconds between the process's full garbage collections (serving.collector); 0: none but
# Python's own, which with agentsite.asgi's thresholds come hours apart.
GC_FULL_COLLECTION_SECONDS = env_number("GC_FULL_COLLECTION_SECONDS", "60", float)
AGENT_SYSTEM_PROMPT = os.environ.get(
    "AGENT_SYSTEM_PROMPT",
    "You are a helpful assistant. Use the tools you are given when they help, and answer in the language of the user.",
)
# Seconds a model call may take (connect + whole stream) before it counts as failed.
AGENT_LLM_TIMEOUT = env_number("AGENT_LLM_TIMEOUT", "120", float)
# Seconds one tool call may run; calls of one round run at most this many at once.
AGENT_TOOL_TIMEOUT = env_number("AGENT_TOOL_TIMEOUT", "30", float)
AGENT_TOOL_CONCURRENCY = env_number("AGENT_TOOL_CONCURRENCY", "4")
# Tool calls one run may make before further calls are refused (0: no cap).
AGENT_MAX_TOOL_CALLS = env_number("AGENT_MAX_TOOL_CALLS", "50")
# Messages (runs) one user may start per minute, across conversations (0: no limit).
AGENT_MESSAGES_PER_MINUTE = env_number("AGENT_MESSAGES_PER_MINUTE", "20")
# Tokens one user's model calls may use per UTC day before new runs are refused (0: no quota).
AGENT_DAILY_TOKEN_QUOTA = env_number("AGENT_DAILY_TOKEN_QUOTA", "0")
# {"model": {"input": $ per million prompt tokens, "output": $ per million completion tokens}}:
# the run inspector's cost (checked by system check agentsite.E005).
AGENT_MODEL_PRICES = env_json("AGENT_MODEL_PRICES", "{}")
# Tokens a run reserves against each budget that applies to it (unset: its max_tokens, else 4096).
AGENT_RUN_TOKEN_RESERVE = env_optional("AGENT_RUN_TOKEN_RESERVE")
# Keep every model call's request messages with its record (large; they hold users' data).
AGENT_TRACE_REQUESTS = env_bool("AGENT_TRACE_REQUESTS", False)
# Seconds between a running run's heartbeats, and silence after which it is dead.
AGENT_HEARTBEAT_SECONDS = env_number("AGENT_HEARTBEAT_SECONDS", "5", float)
AGENT_HEARTBEAT_TIMEOUT = env_number("AGENT_HEARTBEAT_TIMEOUT", "20", float)
# Times a run whose process died is continued by another process (docs/protocol.md, "Run lifecycle").
AGENT_MAX_RESUMES = env_number("AGENT_MAX_RESUMES", "1")
# Messages that may wait in one conversation for its run to end; 0 turns queueing off (docs/protocol.md, "Queued messages").
AGENT_MAX_QUEUED = env_number("AGENT_MAX_QUEUED", "5")
# Compaction (docs/protocol.md, "Compaction"): the default agent's context in tokens (a profile's
# context_tokens overrides it); a run summarizes its older turns first when a request would pass
# AGENT_COMPACT_AT of it (0: never; trimmed to the context instead) or its memory holds more than
# AGENT_COMPACT_MAX_MESSAGES messages (0: no bound), keeping the newest AGENT_COMPACT_KEEP_TURNS turns.
AGENT_CONTEXT_TOKENS = env_number("AGENT_CONTEXT_TOKENS", "32000")
AGENT_COMPACT_AT = env_number("AGENT_COMPACT_AT", "0.8", float)
AGENT_COMPACT_KEEP_TURNS = env_number("AGENT_COMPACT_KEEP_TURNS", "4")
AGENT_COMPACT_MAX_MESSAGES = env_number("AGENT_COMPACT_MAX_MESSAGES", "80")
# The last message of a compaction call: what the model is asked to write.
AGENT_COMPACT_PROMPT = os.environ.get("AGENT_COMPACT_PROMPT") or compaction_defaults.DEFAULT_PROMPT
# Schedules (docs/protocol.md, "Schedules"): the shortest time between two fires of one schedule,
# schedules per user, how often each process looks for due ones, and how old a slot missed while no
# process looked may be and still fire (once).
AGENT_SCHEDULE_MIN_SECONDS = env_number("AGENT_SCHEDULE_MIN_SECONDS", "60")
AGENT_MAX_SCHEDULES = env_number("AGENT_MAX_SCHEDULES", "20")
AGENT_SCHEDULE_POLL_SECONDS = env_number("AGENT_SCHEDULE_POLL_SECONDS", "5", float)
AGENT_SCHEDULE_CATCHUP = env_number("AGENT_SCHEDULE_CATCHUP", "3600")
AGENT_MAX_TRIGGERS = env_number("AGENT_MAX_TRIGGERS", "20")
AGENT_TRIGGER_RATE_LIMIT = env_number("AGENT_TRIGGER_RATE_LIMIT", "10")
# Let a schedule's webhookUrl reach loopback, private, link-local and other non-public addresses.
AGENT_WEBHOOK_ALLOW_PRIVATE = env_bool("AGENT_WEBHOOK_ALLOW_PRIVATE", False)
# How deep sub-agent runs nest: a top-level run is depth 0, its child runs 1; 0 turns delegation
# off (docs/protocol.md, "Sub-agents").
AGENT_MAX_DELEGATION_DEPTH = env_number("AGENT_MAX_DELEGATION_DEPTH", "2")
# Delay between chunks of the demo model, so that it streams like a real one.
AGENT_DEMO_CHUNK_DELAY = env_number("AGENT_DEMO_CHUNK_DELAY", "0.03", float)
TAVILY_API_KEY = env_optional("TAVILY_API_KEY")
# Tool limits (chat/tools/*): chat.runtime.build.tool_settings() hands them to the tools, typed.
# Per-tool timeouts in seconds overriding AGENT_TOOL_TIMEOUT, e.g. "bash=60,fetch_url=20".
AGENT_TOOL_TIMEOUTS = env_number_map("AGENT_TOOL_TIMEOUTS")
# Tool calls one user may start per minute, all conversations and processes together (0: no limit).
AGENT_TOOL_RATE_LIMIT = env_number("AGENT_TOOL_RATE_LIMIT", "60")
AGENT_FILE_MAX_BYTES = env_number("AGENT_FILE_MAX_BYTES", str(tool_defaults.files.max_file_bytes))
AGENT_FILE_READ_CHUNK = env_number("AGENT_FILE_READ_CHUNK", str(tool_defaults.files.read_chunk))
AGENT_WORKSPACE_MAX_BYTES = env_number("AGENT_WORKSPACE_MAX_BYTES", str(tool_defaults.files.workspace_max_bytes))
# Internal hosts fetch_url may reach anyway: exact names, IP addresses or networks (10.1.2.0/24).
AGENT_FETCH_ALLOWED_HOSTS = env_list("AGENT_FETCH_ALLOWED_HOSTS", ",".join(tool_defaults.fetch.allowed_hosts))
AGENT_FETCH_MAX_BYTES = env_number("AGENT_FETCH_MAX_BYTES", str(tool_defaults.fetch.max_bytes))
AGENT_FETCH_MAX_REDIRECTS = env_number("AGENT_FETCH_MAX_REDIRECTS", str(tool_defaults.fetch.max_redirects))
AGENT_FETCH_TIMEOUT = env_number("AGENT_FETCH_TIMEOUT", str(tool_defaults.fetch.timeout), float)
AGENT_SEARCH_MAX_RESULTS = env_number("AGENT_SEARCH_MAX_RESULTS", str(tool_defaults.search.max_results))
AGENT_BASH_TIMEOUT = env_number("AGENT_BASH_TIMEOUT", str(tool_defaults.bash.timeout), float)
AGENT_BASH_CPU_SECONDS = env_number("AGENT_BASH_CPU_SECONDS", str(tool_defaults.bash.cpu_seconds))
AGENT_BASH_MEMORY_MB = env_number("AGENT_BASH_MEMORY_MB", str(tool_defaults.bash.memory_mb))
AGENT_BASH_FILE_SIZE_MB = env_number("AGENT_BASH_FILE_SIZE_MB", str(tool_defaults.bash.file_size_mb))
AGENT_BASH_MAX_PROCESSES = env_number("AGENT_BASH_MAX_PROCESSES", str(tool_defaults.bash.max_processes))
AGENT_BASH_MAX_OUTPUT = env_number("AGENT_BASH_MAX_OUTPUT", str(tool_defaults.bash.max_output_chars))
# The unprivileged user the bash sandbox runs as when the server runs as root.
AGENT_BASH_UID = env_number("AGENT_BASH_UID", str(tool_defaults.bash.sandbox_uid))
# Size of the bash sandbox's in-memory /tmp (0: the kernel's default, half the RAM).
AGENT_BASH_TMP_MB = env_number("AGENT_BASH_TMP_MB", str(tool_defaults.bash.tmp_mb))
# MCP servers whose tools the agent is offered (chat/mcp/): a JSON file in the `mcpServers` format,
# and the seconds a server may take to start or to answer one call.
AGENT_MCP_CONFIG = env_optional("AGENT_MCP_CONFIG")
AGENT_MCP_TIMEOUT = env_number("AGENT_MCP_TIMEOUT", "30", float)
# Tools (names or fnmatch patterns, e.g. "bash,github__*"; empty: none) whose calls wait for the
# user's approval, and the seconds a request stays open before it expires as denied. An agent
# profile's own list replaces the tools for that profile's runs.
AGENT_APPROVAL_TOOLS = env_list("AGENT_APPROVAL_TOOLS", "bash")
AGENT_APPROVAL_TIMEOUT = env_number("AGENT_APPROVAL_TIMEOUT", "600", float)
ALLOW_SIGNUP = env_bool("ALLOW_SIGNUP", True)
# Whether owners may publish read-only links to conversations (chat/sharing/); off: every /s/ link answers 404.
AGENT_SHARING = env_bool("AGENT_SHARING", True)
# Whether a conversation gets a short title from its agent's model after its first answer (chat/runtime/titles.py).
AGENT_TITLES = env_bool("AGENT_TITLES", True)
# The server's name in the public A2A agent card (and the MCP server's serverInfo).
AGENT_SITE_NAME = os.environ.get("AGENT_SITE_NAME", "agentsite")
# Whether the A2A agent cards and /a2a/ are served (chat/doors/a2a/); off: they answer 404.
AGENT_A2A = env_bool("AGENT_A2A", True)
# /metrics answers staff sessions, and scrapers sending `Authorization: Bearer <METRICS_TOKEN>`.
METRICS_TOKEN = env_optional("METRICS_TOKEN")
# Set: runs are exported as OpenTelemetry traces over OTLP/HTTP (chat.ops.tracing); the SDK reads
# this and the other OTEL_* variables itself.
OTEL_EXPORTER_OTLP_ENDPOINT = env_optional("OTEL_EXPORTER_OTLP_ENDPOINT")

# --- Production: HTTPS behind a reverse proxy, sign-in throttling, e-mail ---------------
# Every variable here is in docs/deployment.md, "Production"; deploy/ holds the nginx site.

# Addresses or networks of the reverse proxies in front of the server (deploy/nginx). Only a
# request from one of them has its X-Forwarded-For (the client address: sign-in lockout,
# sign-up limit, logs) and X-Forwarded-Proto (HTTPS) believed; anyone else's are dropped.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", "")
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if TRUSTED_PROXIES else None
# The site is reached over HTTPS (TLS ended by the proxy): cookies only over TLS, HSTS, and
# plain HTTP redirected. /healthz is left on plain HTTP for the proxy's or orchestrator's probes.
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env_number("SECURE_HSTS_SECONDS", "31536000" if HTTPS else "0")
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", HTTPS)

# Failed sign-ins: django-axes locks out a username, and separately a client address, after
# LOGIN_FAILURE_LIMIT failures within LOGIN_LOCKOUT_MINUTES (the right password included);
# the attempts are rows in the database, so every server process sees the same counts.
LOGIN_FAILURE_LIMIT = env_number("LOGIN_FAILURE_LIMIT", "10")
AXES_ENABLED = LOGIN_FAILURE_LIMIT > 0
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=env_number("LOGIN_LOCKOUT_MINUTES", "15", float))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# Kept off: axes resets on success every attempt of the username *or the address*, so an
# attacker could wipe a victim's failures from their address by signing in to their own account.
AXES_RESET_ON_SUCCESS = False
AXES_DISABLE_ACCESS_LOG = True  # failures only; no row for every successful sign-in
AXES_VERBOSE = False  # no start-up banner: an operator's start-up error stays one line
AXES_CLIENT_IP_CALLABLE = "serving.proxy.client_address"
AXES_LOCKOUT_CALLABLE = "chat.accounts.signin.login_locked_out"
# Sign-in with an OpenID Connect provider (docs/configuration.md, "Sign-in with OpenID Connect";
# chat.accounts.oidc). The issuer is kept without a trailing slash: discovery appends its path to it.
OIDC_ISSUER = (env_optional("OIDC_ISSUER") or "").rstrip("/")
OIDC_CLIENT_ID = env_optional("OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env_optional("OIDC_CLIENT_SECRET")
OIDC_ENABLED = bool(OIDC_ISSUER and OIDC_CLIENT_ID and OIDC_CLIENT_SECRET)
OIDC_REDIRECT_URI = env_optional("OIDC_REDIRECT_URI")  # unset: /accounts/oidc/callback/ on the request's host
OIDC_SCOPES = os.environ.get("OIDC_SCOPES", "").strip() or "openid email profile"
OIDC_LABEL = env_optional("OIDC_LABEL")  # unset: the issuer's host
OIDC_GROUPS_CLAIM = env_optional("OIDC_GROUPS_CLAIM") or "groups"
OIDC_ALLOWED_GROUPS = env_list("OIDC_ALLOWED_GROUPS", "")
OIDC_STAFF_GROUPS = env_list("OIDC_STAFF_GROUPS", "")
OIDC_TIMEOUT = env_number("OIDC_TIMEOUT", "10", float)  # seconds for each call to the provider
# false: no password form, and no password accepted anywhere (the login page, the admin's): the
# password backend is left out, so sessions opened with a password end too.
ALLOW_PASSWORD_LOGIN = env_bool("ALLOW_PASSWORD_LOGIN", True)
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses a locked-out sign-in before the password is checked
    *(["django.contrib.auth.backends.ModelBackend"] if ALLOW_PASSWORD_LOGIN else []),
    "chat.accounts.oidc_users.OidcBackend",  # the sessions opened by OIDC sign-in; it checks no credentials
]

# Accounts one client address may create per SIGNUP_RATE_WINDOW seconds (0: no limit),
# counted in the cache: Redis (shared by every process) when REDIS_URL is set, else per process.
SIGNUP_RATE_LIMIT = env_number("SIGNUP_RATE_LIMIT", "5")
SIGNUP_RATE_WINDOW = env_number("SIGNUP_RATE_WINDOW", "3600")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "agentsite",
        }
    }

# Password reset mails a link, so its pages exist only when a mail server is configured.
EMAIL_HOST = env_optional("EMAIL_HOST")
EMAIL_PORT = env_number("EMAIL_PORT", "587")
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", EMAIL_PORT == 587)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", EMAIL_PORT == 465)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "agentsite@localhost")
PASSWORD_RESET_ENABLED = EMAIL_HOST is not None

# One handler, on the root logger, so that each line is printed once. daphne configures logging
# before it loads the application (a handler of its own on the root): a handler on "chat" too
# printed every line twice under `make run`, once per handler. This config replaces daphne's
# handler, so daphne's own lines come in the same format; other libraries say only warnings.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every record through one formatter that escapes what a request may have put in it: a newline
    # or a terminal escape from a client cannot forge a line (serving/log_escape.py).
    "formatters": {
        "plain": {
            "class": "serving.log_escape.EscapingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        }
    },
    "filters": {"daphne_startup": {"()": "serving.daphne_log.DaphneStartupLines"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "chat": {"level": os.environ.get("LOG_LEVEL", "INFO")},
        "django": {"level": "WARNING"},
        "daphne": {"level": "INFO"},  # "Listening on TCP address ..."
        # No HTTP/2 notice, and the page to open once it listens (serving/daphne_log.py).
        "daphne.server": {"filters": ["daphne_startup"]},
    },
}
