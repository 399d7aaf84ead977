#!/usr/bin/env python3
"""Sends a whole request body, then reads the answer, as Python's http.client
(and requests, which is built on it) does: the client a server that closes
while it is still sending would leave with BrokenPipeError or
ConnectionResetError instead of its answer.

usage: send_then_read.py PORT PATH BYTES length|chunked [API_KEY]
Prints {"status", "connection", "body"} as JSON; any exception is a failure.
"""
import http.client
import json
import sys


def main():
    port, path, size, framing = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    body = b'{"model": "stories260K", "max_tokens": 1, "prompt": "' + b"a" * size + b'"}'
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if len(sys.argv) > 5:
        headers["Authorization"] = "Bearer " + sys.argv[5]
    if framing == "chunked":
        pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
        conn.request("POST", path, body=pieces, headers=headers, encode_chunked=True)
    else:
        conn.request("POST", path, body=body, headers=headers)
    res = conn.getresponse()
    data = res.read()
    print(json.dumps({"status": res.status, "connection": res.getheader("Connection"), "body": json.loads(data)}))


if __name__ == "__main__":
    main()
