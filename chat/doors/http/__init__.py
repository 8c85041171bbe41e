"""What the HTTP doors share, so that none imports another: the JSON API's bodies, error shape
and sign-in check (`json_api.py`), and the run endpoints' error answers and signed-in user
(`run_answers.py`), which the SSE stream and the OpenAI-compatible door answer with too."""
