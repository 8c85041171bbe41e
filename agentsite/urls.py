from django.conf import settings
from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.urls import include, path

# Password reset sends a mail: without a mail server its pages would only fail (SMTP errors),
# so they exist only when EMAIL_HOST is set.
_PASSWORD_RESET = {"password_reset", "password_reset_done", "password_reset_confirm", "password_reset_complete"}
account_urlpatterns = [
    pattern
    for pattern in auth_urls.urlpatterns
    if settings.PASSWORD_RESET_ENABLED or pattern.name not in _PASSWORD_RESET
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include(account_urlpatterns)),
    path("", include("chat.urls")),
]

# Under /api/ and /v1/ these answer in the API's error shapes (chat.web.errors).
handler400 = "chat.web.errors.bad_request"
handler404 = "chat.web.errors.not_found"
