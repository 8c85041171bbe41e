from django.conf import settings


def agent(request):
    return {
        "agent_model": settings.AGENT_MODEL,
        "agent_is_demo": settings.AGENT_MODEL == "demo",
        "allow_signup": settings.ALLOW_SIGNUP,
        "password_reset_enabled": settings.PASSWORD_RESET_ENABLED,
    }
