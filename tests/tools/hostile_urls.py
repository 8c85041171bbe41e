"""Hostile URLs for fetch_url: (url, regex expected in the tool error).

None of these may cause a connection. Names are answered by the fake DNS of conftest.py.
"""

SCHEMES = [
    ("file:///etc/passwd", "only http and https"),
    ("ftp://example.com/x", "only http and https"),
    ("gopher://127.0.0.1:6379/_INFO", "only http and https"),
    ("dict://127.0.0.1:11211/stat", "only http and https"),
    ("javascript:alert(1)", "only http and https"),
    ("data:text/html,<b>x</b>", "only http and https"),
    ("ws://127.0.0.1:8000/ws/", "only http and https"),
]

ADDRESSES = [
    # loopback
    ("http://127.0.0.1/", "loopback"),
    ("http://127.0.0.1:8000/admin/", "loopback"),
    ("http://127.255.255.254/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://localhost/", "loopback"),
    ("http://LOCALHOST./", "loopback"),
    ("http://evil.example/", "loopback"),  # a public-looking name resolving to 127.0.0.1
    ("http://user:pass@127.0.0.1/", "loopback"),
    # encoded forms of 127.0.0.1
    ("http://2130706433/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://0x7f.0x0.0x0.0x1/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://127.0.1/", "loopback"),
    ("http://127.000.000.001/", "loopback|Invalid IPv4"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:7f00:1]/", "loopback"),
    ("http://[0:0:0:0:0:ffff:127.0.0.1]/", "loopback"),
    ("http://[2002:7f00:1::]/", "loopback"),  # 6to4
    ("http://[64:ff9b::7f00:1]/", "loopback"),  # NAT64
    # unspecified
    ("http://0.0.0.0/", "unspecified"),
    ("http://0/", "unspecified"),
    ("http://[::]/", "unspecified"),
    # private (RFC 1918)
    ("http://10.0.0.1/", "private"),
    ("http://10.255.255.255/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://172.31.255.254/", "private"),
    ("http://192.168.0.1/", "private"),
    ("http://192.168.1.1:8080/", "private"),
    ("http://0xa000001/", "private"),  # 10.0.0.1
    ("http://167772161/", "private"),  # 10.0.0.1
    ("http://[::ffff:10.0.0.1]/", "private"),
    ("http://[::ffff:192.168.1.1]/", "private"),
    ("http://intranet.example/", "private"),
    ("http://rebind.example/", "private"),  # one public and one private address: refused as a whole
    # link-local, cloud metadata
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://169.254.0.1/", "link-local"),
    ("http://2852039166/", "link-local"),  # 169.254.169.254
    ("http://0xa9fea9fe/", "link-local"),
    ("http://[::ffff:169.254.169.254]/", "link-local"),
    ("http://metadata.example/computeMetadata/v1/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fe80::1%25eth0]/", "link-local"),
    # unique-local / site-local IPv6
    ("http://[fd00::1]/", "unique-local"),
    ("http://[fc00::1]/", "unique-local"),
    ("http://v6-internal.example/", "unique-local"),
    ("http://[fec0::1]/", "site-local"),
    # multicast, broadcast
    ("http://224.0.0.1/", "multicast"),
    ("http://239.255.255.250:1900/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://255.255.255.255/", "private"),
    # carrier-grade NAT
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("http://100.127.255.254/", "carrier-grade NAT"),
    # other non-public ranges
    ("http://192.0.0.1/", "private"),
    ("http://198.18.0.1/", "private"),
    ("http://240.0.0.1/", "private|reserved"),
    ("http://192.0.2.1/", "private"),  # TEST-NET-1
    # malformed numeric hosts are not guessed at
    ("http://1.2.3.4.5/", "neither a valid address nor a name"),
    ("http://0x1g.0.0.1/", "cannot resolve"),
]
