"""The sign-up form (Django's own, with the attributes browsers and password managers use) and
the account page's form."""

from django import forms
from django.conf import settings
from django.contrib.auth.forms import UserCreationForm
from django.utils.translation import gettext_lazy as _


class SignupForm(UserCreationForm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["username"].widget.attrs.update(
            {"autocomplete": "username", "autocapitalize": "none", "spellcheck": "false"}
        )
        for name in ("password1", "password2"):
            self.fields[name].widget.attrs["autocomplete"] = "new-password"


class AccountForm(forms.Form):
    """The account page's settings: the name shown for the user, their email, the interface language."""

    display_name = forms.CharField(
        label=_("Display name"),
        max_length=150,
        required=False,
        help_text=_("Shown in the app instead of your username. Empty: your username."),
    )
    email = forms.EmailField(label=_("Email"), required=False)
    language = forms.ChoiceField(
        label=_("Interface language"),
        required=False,
        choices=[("", _("The browser's language")), *settings.LANGUAGES],
        help_text=_("Saved on your account: every browser you sign in to uses it."),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["display_name"].widget.attrs["autocomplete"] = "name"
        self.fields["email"].widget.attrs.update({"autocomplete": "email", "spellcheck": "false"})


class TokenForm(forms.Form):
    """A new personal API token: a name to tell it by, and when it expires."""

    name = forms.CharField(label=_("Token name"), max_length=100, help_text=_("What uses it, e.g. “CI job”."))
    expires_in_days = forms.TypedChoiceField(
        label=_("Expires"),
        coerce=int,
        empty_value=None,
        required=False,
        choices=[("30", _("in 30 days")), ("90", _("in 90 days")), ("365", _("in a year")), ("", _("never"))],
        initial="90",
    )
