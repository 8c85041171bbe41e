"""The project's ASGI application with /static/ served from the finders, for the browser tests.

`daphne agentsite.asgi:application` leaves static files to the deployment (DEBUG is off);
the tests serve them in-process so that the page under test loads its real scripts.
Everything that is not a static file goes to the real application unchanged.
"""

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

from agentsite.asgi import application as project_application

application = ASGIStaticFilesHandler(project_application)
