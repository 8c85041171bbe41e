from django.conf import settings

from chat.accounts.oidc import oidc_label


def agent(request):
    return {
        "agent_model": settings.AGENT_MODEL,
        "agent_is_demo": settings.AGENT_MODEL == "demo",
        # Sign-up makes a password account: closed too when passwords cannot sign in.
        "allow_signup": settings.ALLOW_SIGNUP and settings.ALLOW_PASSWORD_LOGIN,
        "allow_password_login": settings.ALLOW_PASSWORD_LOGIN,
        "oidc_label": oidc_label() if settings.OIDC_ENABLED else "",
        "password_reset_enabled": settings.PASSWORD_RESET_ENABLED,
    }
