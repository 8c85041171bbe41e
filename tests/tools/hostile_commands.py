"""Hostile commands for the bash tool: (id, command, how it must end).

`expect` is "error" (a tool error, the command killed) or a regex the tool's result must match.
Secrets checked by test_bash.py: none of the server's secret values may appear in any output.
"""

FORK_BOMBS = [
    ("classic", ":(){ :|:& };:"),
    ("loop", "while true; do sleep 100 & done"),
    ("python", "python3 -c 'import os\nwhile True:\n    os.fork()'"),
    ("nohup-setsid", "for i in $(seq 500); do setsid sleep 300 & done; wait"),
]

TIMEOUTS = [
    ("sleep", "sleep 600"),
    ("busy-loop", "while :; do :; done"),
    ("ignore-sigterm", "trap '' TERM INT HUP; sleep 600"),
    ("background-detached", "nohup sleep 600 >/dev/null 2>&1 & disown; sleep 600"),
    ("read-stdin", "read line; sleep 600"),
]

# Try to find the server's secrets: each must print nothing secret.
SECRET_HUNTS = [
    ("env", "env"),
    ("printenv-keys", "printenv OPENAI_API_KEY SECRET_KEY DATABASE_URL TAVILY_API_KEY; echo end"),
    ("proc-1-environ", "cat /proc/1/environ | tr '\\0' '\\n'"),
    ("proc-parent-environ", "cat /proc/$PPID/environ | tr '\\0' '\\n'"),
    ("all-proc-environ", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"),
    ("project-settings", "cat /work/main/agentsite/settings.py /work/main/.env /work/main/db.sqlite3 2>&1 | head -5"),
    ("etc-shadow", "cat /etc/shadow 2>&1"),
    ("root-home", "ls -la /root /home 2>&1"),
    ("find-env-files", "find / -maxdepth 5 \\( -name '.env' -o -name '*.sqlite3' \\) 2>/dev/null | head"),
    ("host-proc", "ls /proc | head -50"),
]

# Network: no route out, and the host's loopback services are not reachable.
NETWORK = [
    ("dev-tcp-host-loopback", "echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED"),
    (
        "python-socket",
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')\"",
    ),
    ("public-ip", "timeout 3 bash -c 'echo > /dev/tcp/1.1.1.1/80' && echo CONNECTED"),
]

RESOURCES = [
    ("memory", "python3 -c 'x = bytearray(2 * 1024**3); print(\"ALLOCATED\")'", r"MemoryError|exit code 1[^0-9]"),
    ("file-size", "head -c 20M /dev/zero > big.bin; ls -l big.bin", r"file size limit|File size limit exceeded"),
    ("output-flood", "yes flood | head -c 5000000", r"output truncated: \d+ more bytes"),
    ("cpu", "python3 -c 'while True: pass'", r"CPU time limit"),
]

# Past the workspace quota (2 MB in the test), in many files (one file alone stops at the quota
# by RLIMIT_FSIZE): each must be killed by the measurement, never reach "DONE".
WORKSPACE_FILLERS = [
    ("many-files", "for i in $(seq 100); do head -c 500K /dev/zero > f$i.bin; done; sleep 30; echo DONE"),
    (
        "append-forever",
        "while true; do head -c 100K /dev/zero >> grow.bin || head -c 100K /dev/zero > grow$RANDOM; done",
    ),
    ("background-writer", "(for i in $(seq 100); do head -c 500K /dev/zero > bg$i.bin; done) & sleep 30; echo DONE"),
    (
        "python-files",
        "python3 -c \"\nfor i in range(100):\n    open(f'p{i}', 'wb').write(bytes(500_000))\n\"; sleep 30; echo DONE",
    ),
]
