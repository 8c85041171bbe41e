"""Reading the environment into settings: each reader turns a bad value into an
ImproperlyConfigured naming the variable (agentsite/startup.py prints it as one line an operator
can act on), never echoing a secret."""

import json
import os

import dj_database_url
from django.core.exceptions import ImproperlyConfigured


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
        raise ImproperlyConfigured(
            f"{name} must be a{'n integer' if kind is int else ' number'}, not {raw!r}"
        ) from None


def env_json(name: str, default: str):
    raw = os.environ.get(name, "").strip() or default
    try:
        return json.loads(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be JSON, not {raw[:80]!r}") from None


def env_optional(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


_DATABASE_SCHEMES = ("sqlite", "postgres", "postgresql", "pgsql")


def database_from_url(url: str, **options) -> dict:
    """DATABASES["default"] from DATABASE_URL; the URL (it holds the password) is never echoed."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in _DATABASE_SCHEMES:
        shown = f"scheme {scheme!r}" if scheme else "no scheme"
        raise ImproperlyConfigured(
            f"DATABASE_URL has {shown}; use sqlite:///path/to/db.sqlite3 or postgres://user:pass@host:5432/name"
        )
    try:
        return dj_database_url.parse(url, **options)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is malformed ({type(exc).__name__})") from None


def env_number_map(name: str) -> dict[str, float]:
    """`a=1,b=2.5` into {"a": 1.0, "b": 2.5}."""
    numbers = {}
    for item in env_list(name, ""):
        key, _, value = item.partition("=")
        if not value.strip():
            continue
        try:
            numbers[key.strip()] = float(value)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be name=number pairs, not {item!r}") from None
    return numbers
