"""curl under ulsrun downloads 100 MiB from `python3 -m http.server` under ulsrun on the other
node; the file's SHA-256 is checked.

http.server is a ThreadingHTTPServer: the listening socket is used by the main thread and
each connection by a thread of its own. `--bind 0.0.0.0`: without it, http.server may pick
an IPv6 dual-stack socket, which the shim leaves to the kernel.
"""
from conftest import PAYLOAD_BYTES, PYTHON, check_copy, program, received_file

PORT = 8000
TIMEOUT = 60


def test_curl_downloads_100mib_intact_from_python_http_server(tb, payload, datadir):
    curl = program("curl")
    path, digest = payload
    server = tb.start(tb.uls(1, [PYTHON, "-u", "-m", "http.server", str(PORT), "--bind", "0.0.0.0",
                                 "--directory", datadir]), "http-server-n1")
    tb.wait_listening(1, PORT, server)
    out = received_file(datadir, "curl.bin")
    before = tb.counters()
    url = f"http://{tb.ip(1)}:{PORT}/payload.bin"
    client = tb.start(tb.uls(2, [curl, "-sS", "--fail", "--max-time", str(TIMEOUT), "-o", out,
                                 "-w", "%{http_code} %{size_download}\n", url]), "curl-n2")
    stdout = client.check(TIMEOUT + 10)
    assert stdout.split() == ["200", str(PAYLOAD_BYTES)], f"curl reports {stdout!r}"
    check_copy(out, digest, PAYLOAD_BYTES)
    tb.assert_through_ulstack(before, received={2: PAYLOAD_BYTES}, sent={1: PAYLOAD_BYTES})
    assert server.poll() is None, f"http.server exited:\n{server.output()}"
    assert '"GET /payload.bin HTTP/1.1" 200' in server.stderr(), server.output()
