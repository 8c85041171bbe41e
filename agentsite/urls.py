from django.conf import settings
from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.urls import include, path

from chat.accounts import oidc, signin

# Password reset sends a mail: without a mail server its pages would only fail (SMTP errors),
# so they exist only when EMAIL_HOST is set.
_PASSWORD_RESET = {"password_reset", "password_reset_done", "password_reset_confirm", "password_reset_complete"}
# Sign-in and logout are Django's views with the site's additions (chat.accounts.signin): password
# sign-in may be turned off, and logout also ends the OpenID provider's session.
account_urlpatterns = [
    path("login/", signin.LoginView.as_view(), name="login"),
    path("logout/", signin.LogoutView.as_view(), name="logout"),
    path("oidc/login/", oidc.oidc_login, name="oidc_login"),
    path("oidc/callback/", oidc.oidc_callback, name="oidc_callback"),
] + [
    pattern
    for pattern in auth_urls.urlpatterns
    if pattern.name not in {"login", "logout"}
    and (settings.PASSWORD_RESET_ENABLED or pattern.name not in _PASSWORD_RESET)
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include(account_urlpatterns)),
    path("", include("chat.urls")),
]

# Under /api/ and /v1/ these answer in the API's error shapes, and a database that does not
# answer is a 503 the client retries, not a 500 (chat.doors.errors).
handler400 = "chat.doors.errors.bad_request"
handler404 = "chat.doors.errors.not_found"
handler500 = "chat.doors.errors.server_error"
