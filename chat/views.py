"""HTML pages: the chat page and sign-up (the UI issue fills these in)."""

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404
from django.shortcuts import redirect, render


@login_required
def chat_page(request):
    return render(request, "chat/index.html")


def signup(request):
    if not settings.ALLOW_SIGNUP:
        raise Http404("sign-up is closed")
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user)
        return redirect("chat")
    return render(request, "registration/signup.html", {"form": form})
