#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 reverse proxy for testing the object-store client (src/store/).

    fault_proxy.py --upstream 127.0.0.1:MOTO_PORT [--listen PORT] [--rule JSON]...

It listens on 127.0.0.1:PORT (0: any free port; the chosen one is printed as "listening PORT" on
stdout) and forwards every request to the upstream server byte for byte (a fresh upstream
connection per request), Host header included: SigV4 signs the Host the client sent (the proxy's
address), and the upstream (moto) verifies against the Host it receives, so signatures stay valid
although the upstream listens elsewhere.

Faults are rules, given as JSON on the command line or posted to the control endpoint (a target
under /__fault__/, which is never forwarded):

    POST   /__fault__/rules   body: a rule or a list of rules, appended
    DELETE /__fault__/rules   removes every rule and clears the log
    GET    /__fault__/log     JSON list: one entry per request seen (method, target, fault; a
                              hook's exit code and stderr as hook, hook_stderr)

A rule:
    {"method": "PUT",              optional; any method when absent
     "target": "partNumber=2",     optional regular expression searched in the request target
     "nth": 1,                     the first matching request it fires on (1-based; default 1)
     "times": 1,                   how many consecutive matches it fires on (default 1; 0: always)
     "action": ...,                one of the below
     "status": 503, "bytes": K, "seconds": S}

actions:
    "error"           answer `status` (default 500) with an S3 error XML body (InternalError; 503 is
                      SlowDown, 404 NoSuchUpload), without forwarding; the connection is closed after it
    "reset_request"   forward the head and K bytes of the request body, then reset both connections
    "reset_response"  forward the request, relay the answer's head and K body bytes, then reset
    "stall"           forward the request, relay the head and K body bytes, then send nothing for S
                      seconds (the client's stall timeout should fire), then carry on; without
                      "bytes", wait S seconds before reading the request at all (a hung server)
    "truncate"        relay the head unchanged (its Content-Length stays correct) and K body bytes,
                      then close the connection cleanly: a body that ends early
    "short"           relay the head with Content-Length rewritten to K and K body bytes: a server
                      that lies about the length (only a check of the length against the request
                      catches it)
    "hold_response"   forward the request and wait for the answer's head (the upstream has acted),
                      then send nothing for S seconds before relaying it: a slow server, silent
                      while it works (a CompleteMultipartUpload assembling a large object)
    "drop_response"   forward the request and wait for the answer's head, then reset the client
                      connection without sending a byte: the request took effect, its answer is lost
    "hook"            forward unchanged, but first run `command` (a list; `env`, a dict, is added to
                      the proxy's environment) and wait for it: a way to change an object behind
                      the client's back mid-transfer

Python 3 standard library only; one thread per client connection.
"""
import argparse
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

CONTROL_PREFIX = "/__fault__/"
# Codes and messages as S3 gives them: docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html
ERROR_CODES = {404: ("NoSuchUpload", "The specified upload does not exist. The upload ID may be invalid, or the "
                     "upload may have been aborted or completed."),
               500: ("InternalError", "We encountered an internal error. Please try again."),
               503: ("SlowDown", "Please reduce your request rate.")}


class Rule:
    def __init__(self, spec):
        self.spec = spec
        self.method = spec.get("method")
        self.target = re.compile(spec["target"]) if spec.get("target") else None
        self.nth = int(spec.get("nth", 1))
        self.times = int(spec.get("times", 1))
        self.action = spec["action"]
        if self.action not in ("error", "reset_request", "reset_response", "stall", "truncate", "short",
                               "hold_response", "drop_response", "hook"):
            raise ValueError("unknown action " + self.action)
        self.seen = 0

    def fires(self, method, target):
        """Counts a matching request; whether this one gets the fault. Call under the rules lock."""
        if self.method and self.method != method:
            return False
        if self.target and not self.target.search(target):
            return False
        self.seen += 1
        return self.seen >= self.nth and (self.times == 0 or self.seen < self.nth + self.times)


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.log = []

    def add(self, specs):
        rules = [Rule(s) for s in (specs if isinstance(specs, list) else [specs])]
        with self.lock:
            self.rules.extend(rules)

    def clear(self):
        with self.lock:
            self.rules.clear()
            self.log.clear()

    def match(self, method, target):
        with self.lock:
            fired = None
            for rule in self.rules:
                if rule.fires(method, target) and fired is None:
                    fired = rule
            entry = {"method": method, "target": target, "fault": fired.action if fired else None}
            self.log.append(entry)
            return fired, entry

    def note(self, entry, **fields):
        """Adds fields to a log entry that match() returned (a hook's outcome)."""
        with self.lock:
            entry.update(fields)

    def snapshot(self):
        with self.lock:
            return list(self.log)


class Closed(Exception):
    """The peer closed the connection (or reset it)."""


class Reader:
    """Buffered reads from a socket: lines, exact counts, and everything until close."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise Closed()
        self.buffer += data

    def head(self):
        """The bytes of a message head, up to and including the blank line."""
        while b"\r\n\r\n" not in self.buffer:
            if len(self.buffer) > 1 << 20:
                raise ValueError("head too large")
            self._fill()
        end = self.buffer.index(b"\r\n\r\n") + 4
        head, self.buffer = self.buffer[:end], self.buffer[end:]
        return head

    def line(self):
        while b"\r\n" not in self.buffer:
            self._fill()
        end = self.buffer.index(b"\r\n") + 2
        line, self.buffer = self.buffer[:end], self.buffer[end:]
        return line

    def some(self, limit):
        """Up to `limit` bytes (at least one)."""
        if not self.buffer:
            self._fill()
        data, self.buffer = self.buffer[:limit], self.buffer[limit:]
        return data

    def until_close(self):
        """Chunks until the peer closes."""
        while True:
            if self.buffer:
                data, self.buffer = self.buffer, b""
                yield data
            try:
                self._fill()
            except Closed:
                return


def parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    first = lines[0]
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip().lower(), value.strip()))
    return first, headers


def header(headers, name):
    for n, v in headers:
        if n == name:
            return v
    return None


def body_chunks(reader, headers, no_body=False):
    """A generator of the raw bytes of a message body as they arrive (chunked framing included),
    or None when the message has no framing (a response then runs until the server closes)."""
    if no_body:
        return iter(())
    if (header(headers, "transfer-encoding") or "").lower().endswith("chunked"):
        return _chunked(reader)
    length = header(headers, "content-length")
    if length is None:
        return None
    return _counted(reader, int(length))


def _chunked(reader):
    while True:
        size_line = reader.line()
        yield size_line
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            while True:  # trailers, then the blank line
                line = reader.line()
                yield line
                if line == b"\r\n":
                    return
        left = size + 2  # the data and its CRLF
        while left:
            data = reader.some(left)
            left -= len(data)
            yield data


def _counted(reader, left):
    while left:
        data = reader.some(min(left, 1 << 20))
        left -= len(data)
        yield data


def reset(sock):
    """Closes with a TCP RST instead of a FIN (SO_LINGER with a zero timeout)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


def send_limited(sock, chunks, limit):
    """Sends chunks until `limit` bytes went (None: all). Returns True when the limit was hit."""
    sent = 0
    for data in chunks:
        if limit is not None and sent + len(data) >= limit:
            sock.sendall(data[:limit - sent])
            return True
        sock.sendall(data)
        sent += len(data)
    return False


def s3_error(status):
    code, message = ERROR_CODES.get(status, ("ServiceUnavailable", "Service is unable to handle request."))
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<RequestId>fault-proxy</RequestId></Error>").encode()
    reason = {404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "Error")
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


class Connection:
    def __init__(self, client, upstream_address, faults):
        self.client = client
        self.reader = Reader(client)
        self.upstream_address = upstream_address
        self.faults = faults
        self.upstream = None
        self.upstream_reader = None

    def run(self):
        try:
            while self.exchange():
                pass
        except (Closed, OSError, ValueError):
            pass
        finally:
            for sock in (self.client, self.upstream):
                if sock:
                    try:
                        sock.close()
                    except OSError:
                        pass

    def control(self, method, target, headers):
        body = b"".join(body_chunks(self.reader, headers) or [])
        if target.startswith(CONTROL_PREFIX + "rules") and method == "POST":
            self.faults.add(json.loads(body))
            answer = b"{}"
        elif target.startswith(CONTROL_PREFIX + "rules") and method == "DELETE":
            self.faults.clear()
            answer = b"{}"
        elif target.startswith(CONTROL_PREFIX + "log"):
            answer = json.dumps(self.faults.snapshot()).encode()
        else:
            self.client.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return True
        self.client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                            + str(len(answer)).encode() + b"\r\n\r\n" + answer)
        return True

    def connect_upstream(self):
        if self.upstream is None:
            self.upstream = socket.create_connection(self.upstream_address)
            self.upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.upstream_reader = Reader(self.upstream)

    def drop_upstream(self):
        if self.upstream:
            self.upstream.close()
        self.upstream = None
        self.upstream_reader = None

    def exchange(self):
        """One request and its answer; False when the client connection is done."""
        head = self.reader.head()
        first, headers = parse_head(head)
        method, target, _ = first.split(" ", 2)
        if target.startswith(CONTROL_PREFIX):
            return self.control(method, target, headers)

        rule, entry = self.faults.match(method, target)
        action = rule.action if rule else None
        limit = int(rule.spec.get("bytes", 0)) if rule else None
        request_body = body_chunks(self.reader, headers) or iter(())

        if action == "error":
            for _ in request_body:
                pass
            self.client.sendall(s3_error(int(rule.spec.get("status", 500))))
            return False
        if action == "stall" and "bytes" not in rule.spec:
            time.sleep(float(rule.spec.get("seconds", 10)))  # neither read nor answer: a hung server
            rule = action = None
        if action == "hook":
            env = dict(os.environ, **rule.spec.get("env", {}))
            hook = subprocess.run(rule.spec["command"], env=env, check=False, capture_output=True)
            self.faults.note(entry, hook=hook.returncode, hook_stderr=hook.stderr.decode(errors="replace")[-2000:])

        # A fresh upstream connection per request: an idle one the upstream closed would otherwise
        # fail a request the client then retries, and the tests count requests.
        self.drop_upstream()
        self.connect_upstream()
        self.upstream.sendall(head)

        if action == "reset_request":
            send_limited(self.upstream, request_body, limit)
            reset(self.upstream)
            self.upstream = None
            reset(self.client)
            raise Closed()
        # The request body goes up on its own thread so an early answer cannot deadlock the relay.
        failed = []

        def pump():
            try:
                for data in request_body:
                    self.upstream.sendall(data)
            except (Closed, OSError) as e:
                failed.append(e)
                try:  # the client went away mid-body: wake the relay, which waits for an answer
                    self.upstream.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        sender = threading.Thread(target=pump, daemon=True)
        sender.start()
        try:
            keep = self.relay_answer(method, rule, limit)
        finally:
            sender.join()
        return keep and not failed

    def relay_answer(self, method, rule, limit):
        action = rule.action if rule else None
        while True:
            head = self.upstream_reader.head()
            first, headers = parse_head(head)
            status = int(first.split(" ")[1])
            if status >= 200:
                break
            self.client.sendall(head)  # an interim 100 Continue
        if action == "drop_response":
            reset(self.client)
            self.drop_upstream()
            raise Closed()
        if action == "hold_response":
            time.sleep(float(rule.spec.get("seconds", 10)))
        no_body = method == "HEAD" or status in (204, 304)
        chunks = body_chunks(self.upstream_reader, headers, no_body)
        to_close = chunks is None
        if to_close:
            chunks = self.upstream_reader.until_close()
        connection = (header(headers, "connection") or "").lower()

        if action == "short":
            lines = head.decode("latin-1").split("\r\n")
            lines = [f"Content-Length: {limit}" if line.lower().startswith("content-length:") else line
                     for line in lines]
            head = "\r\n".join(lines).encode("latin-1")
        self.client.sendall(head)

        if action in ("reset_response", "truncate", "short", "stall"):
            hit = send_limited(self.client, chunks, limit)
            if action == "reset_response":
                reset(self.client)
                self.drop_upstream()
                raise Closed()
            if action in ("truncate", "short"):
                self.drop_upstream()  # the rest of the answer is never read
                if action == "truncate":
                    raise Closed()
                return False
            if hit:  # stall
                time.sleep(float(rule.spec.get("seconds", 10)))
                for data in chunks:
                    self.client.sendall(data)
        else:
            for data in chunks:
                self.client.sendall(data)
        if to_close or connection == "close":
            self.drop_upstream()
            return connection != "close" and not to_close
        return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the real server")
    parser.add_argument("--listen", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--rule", action="append", default=[], help="a rule as JSON (repeatable)")
    args = parser.parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    upstream = (host or "127.0.0.1", int(port))
    faults = Faults()
    for spec in args.rule:
        faults.add(json.loads(spec))

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.listen))
    listener.listen(64)
    print("listening", listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=Connection(client, upstream, faults).run, daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
