"""Hostile paths for the workspace file tools: (path, substring expected in the tool error).

Every entry must be refused by read_file, write_file and list_files alike (list_files
accepts the workspace root itself, which none of these name).
"""

ESCAPES = [
    ("../secret.txt", "'..' is not allowed"),
    ("../../etc/passwd", "'..' is not allowed"),
    ("a/../../etc/passwd", "'..' is not allowed"),
    ("./../outside", "'..' is not allowed"),
    ("a/b/../../..", "'..' is not allowed"),
    ("..", "'..' is not allowed"),
    ("../workspace2/x", "'..' is not allowed"),
    ("/etc/passwd", "absolute path"),
    ("/", "absolute path"),
    ("//etc/passwd", "absolute path"),
    ("/proc/self/environ", "absolute path"),
    ("  /etc/passwd", "absolute path"),
    ("~/.ssh/id_rsa", "absolute path"),
    ("~root/.bashrc", "absolute path"),
    ("..\\..\\windows\\win.ini", "backslash"),
    ("a\\..\\..\\b", "backslash"),
    ("C:\\Windows\\system.ini", "backslash"),
    ("file.txt\x00.png", "NUL byte"),
    ("\x00", "NUL byte"),
    ("ok/\x00/../x", "NUL byte"),
    ("a/" * 600 + "x", "longer than"),
    ("x" * 300, "longer than 255"),
]

# Names that exist as symlinks in the workspace (made by the test) and point out of it.
SYMLINK_ESCAPES = [
    ("link-to-etc-passwd", "/etc/passwd"),
    ("link-to-root", "/"),
    ("link-to-parent", ".."),
    ("link-to-sibling", "../other-workspace/secret.txt"),
    ("dir/nested-link", "../../other-workspace"),
    ("chain-a", "chain-b"),  # chain-b -> /etc
]
