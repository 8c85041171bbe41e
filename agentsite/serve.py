"""`python -m agentsite.serve`: the image's default command (docs/deployment.md; PROTOCOL section 19).

The project's daphne (serving.serve: daphne's command line with a lighter queue and a bounded send
buffer per connection) serving agentsite.asgi:application on 0.0.0.0:8000, the address a container
publishes. Arguments, when given, are daphne's own and replace those defaults whole:

    python -m agentsite.serve                      # 0.0.0.0:8000
    python -m agentsite.serve -b 127.0.0.1 -p 9000 agentsite.asgi:application
"""

from __future__ import annotations

import sys

from serving.serve import ServeCommand

DEFAULTS = ["-b", "0.0.0.0", "-p", "8000", "agentsite.asgi:application"]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    ServeCommand().run(args or DEFAULTS)


if __name__ == "__main__":
    main()
