"""Settings for agentsite, read from the environment (PROTOCOL.md section 1)."""

import os
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

_DEV_SECRET_KEY = "dev-insecure-agentsite-key-change-me"  # noqa: S105 - flagged by a system check


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_number(name: str, default: str, kind: type = int):
    raw = os.environ.get(name, "").strip() or default
    try:
        return kind(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a{'n integer' if kind is int else ' number'}, not {raw!r}") from None


def env_optional(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


SECRET_KEY = os.environ.get("SECRET_KEY") or _DEV_SECRET_KEY
DEBUG = env_bool("DEBUG", False)
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
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Serves /static/ from the app's own process (daphne serves no files), with
    # far-future caching for hashed names; no web server needed in front.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "chat.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
                "chat.context_processors.agent",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        # Persistent: Channels closes "old" connections after every consumer message, and
        # with max age 0 each socket's doorbell made the ORM thread reconnect.
        conn_max_age=600,
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Runs write from several threads of one process; WAL lets readers go on while
    # a writer commits, and the busy timeout makes writers queue instead of failing.
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
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Only for deployments that run collectstatic; by default files are served straight
# from static/ (the finders), so `make run` needs no collectstatic step.
STATIC_ROOT = os.environ.get("STATIC_ROOT") or None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Channel layer: the doorbell that tells sockets a new event row exists.
REDIS_URL = env_optional("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Plain pub/sub: group_send is one PUBLISH instead of a Lua script over
            # every member channel, and nothing piles up for a dead consumer.
            # Why this class and these numbers: see README "Channel layer".
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "chat.layers.InMemoryChannelLayer",
            # One doorbell per flush window per socket; a consumer that falls this
            # far behind refills from the database, so dropping is safe.
            "CONFIG": {"capacity": 1000, "expiry": 60},
        }
    }

# --- The agent ----------------------------------------------------------------
OPENAI_API_KEY = env_optional("OPENAI_API_KEY")
OPENAI_BASE_URL = env_optional("OPENAI_BASE_URL")
AGENT_MODEL = env_optional("AGENT_MODEL") or ("demo" if not OPENAI_API_KEY else None)
AGENT_MAX_RETRIES = env_number("AGENT_MAX_RETRIES", "3")
AGENT_RETRY_INTERVAL = env_number("AGENT_RETRY_INTERVAL", "10", float)
AGENT_MAX_ITERATIONS = env_number("AGENT_MAX_ITERATIONS", "10")
AGENT_TEMPERATURE = env_optional("AGENT_TEMPERATURE")
AGENT_MAX_TOKENS = env_optional("AGENT_MAX_TOKENS")
AGENT_TOP_P = env_optional("AGENT_TOP_P")
AGENT_TOOLS = env_list("AGENT_TOOLS", "calculator,current_time,read_file,write_file,list_files,load_skill")
AGENT_SKILLS_DIR = Path(os.environ.get("AGENT_SKILLS_DIR", str(BASE_DIR / "skills")))
AGENT_WORKSPACE_ROOT = Path(os.environ.get("AGENT_WORKSPACE_ROOT", str(BASE_DIR / "workspaces")))
AGENT_MAX_MESSAGE_CHARS = env_number("AGENT_MAX_MESSAGE_CHARS", "32000")
AGENT_STREAM_FLUSH_MS = env_number("AGENT_STREAM_FLUSH_MS", "50")
# Open WebSockets one user may hold in one server process (0: no cap); over it: close 4429.
AGENT_MAX_SOCKETS_PER_USER = env_number("AGENT_MAX_SOCKETS_PER_USER", "20")
AGENT_SYSTEM_PROMPT = os.environ.get(
    "AGENT_SYSTEM_PROMPT",
    "You are a helpful assistant. Use the tools you are given when they help, "
    "and answer in the language of the user.",
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
# Seconds between a running run's heartbeats, and silence after which it is dead.
AGENT_HEARTBEAT_SECONDS = env_number("AGENT_HEARTBEAT_SECONDS", "5", float)
AGENT_HEARTBEAT_TIMEOUT = env_number("AGENT_HEARTBEAT_TIMEOUT", "20", float)
# Delay between chunks of the demo model, so that it streams like a real one.
AGENT_DEMO_CHUNK_DELAY = env_number("AGENT_DEMO_CHUNK_DELAY", "0.03", float)
TAVILY_API_KEY = env_optional("TAVILY_API_KEY")
# Tool limits (chat/tools/*): handed to the tools through ToolContext.settings.
# Per-tool timeouts in seconds overriding AGENT_TOOL_TIMEOUT, e.g. "bash=60,fetch_url=20".
AGENT_TOOL_TIMEOUTS = {
    name.strip(): float(value)
    for name, _, value in (item.partition("=") for item in env_list("AGENT_TOOL_TIMEOUTS", ""))
    if value.strip()
}
# Tool calls one user may start per minute, all conversations and processes together (0: no limit).
AGENT_TOOL_RATE_LIMIT = env_number("AGENT_TOOL_RATE_LIMIT", "60")
AGENT_FILE_MAX_BYTES = env_number("AGENT_FILE_MAX_BYTES", "1000000")
AGENT_FILE_READ_CHUNK = env_number("AGENT_FILE_READ_CHUNK", "16000")
AGENT_WORKSPACE_MAX_BYTES = env_number("AGENT_WORKSPACE_MAX_BYTES", "50000000")
# Internal hosts fetch_url may reach anyway: exact names, IP addresses or networks (10.1.2.0/24).
AGENT_FETCH_ALLOWED_HOSTS = env_list("AGENT_FETCH_ALLOWED_HOSTS", "")
AGENT_FETCH_MAX_BYTES = env_number("AGENT_FETCH_MAX_BYTES", "2000000")
AGENT_FETCH_MAX_REDIRECTS = env_number("AGENT_FETCH_MAX_REDIRECTS", "5")
AGENT_FETCH_TIMEOUT = env_number("AGENT_FETCH_TIMEOUT", "15", float)
AGENT_SEARCH_MAX_RESULTS = env_number("AGENT_SEARCH_MAX_RESULTS", "5")
AGENT_BASH_TIMEOUT = env_number("AGENT_BASH_TIMEOUT", "30", float)
AGENT_BASH_CPU_SECONDS = env_number("AGENT_BASH_CPU_SECONDS", "30")
AGENT_BASH_MEMORY_MB = env_number("AGENT_BASH_MEMORY_MB", "512")
AGENT_BASH_FILE_SIZE_MB = env_number("AGENT_BASH_FILE_SIZE_MB", "64")
AGENT_BASH_MAX_PROCESSES = env_number("AGENT_BASH_MAX_PROCESSES", "64")
AGENT_BASH_MAX_OUTPUT = env_number("AGENT_BASH_MAX_OUTPUT", "16000")
# The unprivileged user the bash sandbox runs as when the server runs as root.
AGENT_BASH_UID = env_number("AGENT_BASH_UID", "65534")
ALLOW_SIGNUP = env_bool("ALLOW_SIGNUP", True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "chat": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
        "django": {"handlers": ["console"], "level": "WARNING"},
        # One line per model request is noise at INFO.
        "httpx2": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}
