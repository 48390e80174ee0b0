"""A keep-alive connection to a server started by one of loadtest's scripts,
once it answers `/readyz` (under valgrind, start takes seconds).

    sys.path.insert(0, LOADTEST_DIR); from ready import connect_when_ready
"""
import http.client
import sys
import time


def connect_when_ready(port, tries=600, timeout=60):
    """The connection that got the first 200 from /readyz; exits the script
    if the server is not ready after `tries` attempts 0.1 s apart."""
    for _ in range(tries):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            c.request("GET", "/readyz")
            r = c.getresponse()
            r.read()
            if r.status == 200:
                return c
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("the server did not become ready")
