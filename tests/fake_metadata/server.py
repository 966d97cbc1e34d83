#!/usr/bin/env python3
"""A fake cloud metadata service for the `gpuhost run` integration tests. Standard library only.

    server.py --cloud aws|azure|gcp|alibaba|tencent|volcengine

Listens on 127.0.0.1 at a port the OS picks and prints {"port": N} as its first stdout line.
It answers like the cloud's in-guest endpoint (shared/research/02 §1.1-1.5): the cloud's paths
only (anything else is 404), its mandatory headers, its exact notice bodies. Tests drive it:

    POST /_control/notice  {"in_seconds": N}   a notice appears, deadline now + N
                           {"in_seconds": N, "advisory": true}   AWS rebalance / Azure Reboot instead
    POST /_control/mode    {"mode": "normal" | "error500" | "garbage" | "hang"}
    POST /_control/probe   {"url": U}   Azure: when a StartRequests POST acknowledges the event, GET U
                           (e.g. an S3 listing) before answering, so a test sees what was there at
                           the moment of the acknowledgement
    GET  /_control/log     every request seen: [{"method", "path", "headers", "body", "time"}, ...];
                           "time" is when it arrived (epoch seconds); an acknowledgement also has
                           "acknowledged": true and, with a probe set, "probe": {"status", "body"}
"""
import argparse
import email.utils
import json
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HANG_LIMIT_S = 60  # a hanging answer (mode "hang", GCP wait_for_change) ends after this
VM_NAME = "gpuhost-fake-vm"


class State:
    def __init__(self, cloud):
        self.cloud = cloud
        self.lock = threading.Condition()
        self.mode = "normal"
        self.deadline = None       # epoch seconds of the pending notice, or None
        self.advisory = False
        self.event_id = None       # Azure
        self.acknowledged = False  # Azure: a StartRequests POST named the event
        self.version = 0           # bumped on every notice change (GCP ETag, Azure incarnation)
        self.tokens = set()        # AWS / Alibaba session tokens handed out
        self.probe_url = None      # Azure: fetched when the event is acknowledged
        self.log = []


def iso_utc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None  # set in main()

    def log_message(self, *args):  # quiet: tests read /_control/log instead
        pass

    # ---- plumbing ----

    def reply(self, status, body="", content_type="text/plain", headers=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        url = urlsplit(self.path)
        s = self.state
        if url.path.startswith("/_control/"):
            return self.control(url.path, body)
        self.entry = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                      "body": body, "time": time.time()}
        with s.lock:
            s.log.append(self.entry)
            mode = s.mode
        if mode == "error500":
            return self.reply(500, "Internal Server Error")
        if mode == "garbage":
            return self.reply(200, "<html><body>\x00\x01 not a metadata answer }{</body></html>", "text/html")
        if mode == "hang":
            with s.lock:
                s.lock.wait_for(lambda: s.mode != "hang", timeout=HANG_LIMIT_S)
            self.close_connection = True
            return None  # no answer at all
        getattr(self, "cloud_" + s.cloud)(self.command, url.path, parse_qs(url.query), body)

    do_GET = do_PUT = do_POST = do_DELETE = handle_any

    def control(self, path, body):
        s = self.state
        args = json.loads(body) if body else {}
        with s.lock:
            if self.command == "GET" and path == "/_control/log":
                return self.reply(200, json.dumps(s.log), "application/json")
            if self.command == "POST" and path == "/_control/notice":
                s.deadline = time.time() + float(args.get("in_seconds", 120))
                s.advisory = bool(args.get("advisory", False))
                s.event_id = str(uuid.uuid4()).upper()
                s.acknowledged = False
            elif self.command == "POST" and path == "/_control/mode" and args.get("mode") in (
                    "normal", "error500", "garbage", "hang"):
                s.mode = args["mode"]
            elif self.command == "POST" and path == "/_control/probe":
                s.probe_url = args.get("url")
                return self.reply(200, "{}", "application/json")
            else:
                return self.reply(400, "unknown control request")
            s.version += 1
            s.lock.notify_all()
        return self.reply(200, "{}", "application/json")

    # AWS and Alibaba: PUT /latest/api/token with a TTL header gives a token; once one was handed
    # out, GETs without a valid one are refused with 401 (IMDSv2 "required" / hardened mode).
    def token_ok(self, method, path, ttl_header, token_header):
        s = self.state
        if method == "PUT" and path == "/latest/api/token":
            if not self.headers.get(ttl_header):
                self.reply(400, "missing " + ttl_header)
                return False
            token = uuid.uuid4().hex
            with s.lock:
                s.tokens.add(token)
            self.reply(200, token)
            return False
        with s.lock:
            required = bool(s.tokens)
            valid = self.headers.get(token_header) in s.tokens
        if method != "GET" or (required and not valid):
            self.reply(405 if method != "GET" else 401, "")
            return False
        return True

    # AWS EC2 UG spot-instance-termination-notices, rebalance-recommendations.
    def cloud_aws(self, method, path, query, body):
        if not self.token_ok(method, path, "X-aws-ec2-metadata-token-ttl-seconds", "X-aws-ec2-metadata-token"):
            return
        s = self.state
        if path == "/latest/meta-data/spot/instance-action" and s.deadline and not s.advisory:
            return self.reply(200, json.dumps({"action": "terminate", "time": iso_utc(s.deadline)}), "text/plain")
        if path == "/latest/meta-data/events/recommendations/rebalance" and s.deadline and s.advisory:
            return self.reply(200, json.dumps({"noticeTime": iso_utc(time.time())}), "text/plain")
        self.reply(404, "Not Found")

    # azure-docs articles/virtual-machines/linux/scheduled-events.md.
    def cloud_azure(self, method, path, query, body):
        s = self.state
        if self.headers.get("Metadata") != "true":
            return self.reply(400, json.dumps({"error": "Bad request. Required metadata header not specified"}),
                              "application/json")
        if path == "/metadata/instance/compute/name" and method == "GET" and "api-version" in query:
            return self.reply(200, VM_NAME)
        if path != "/metadata/scheduledevents" or "api-version" not in query:
            return self.reply(404, "Not Found")
        if method == "POST":
            try:
                ids = [r["EventId"] for r in json.loads(body)["StartRequests"]]
            except (ValueError, KeyError, TypeError):
                return self.reply(400, "bad StartRequests")
            with s.lock:
                if s.event_id not in ids:
                    return self.reply(400, "unknown EventId")
                s.acknowledged = True
                s.version += 1
                self.entry["acknowledged"] = True
                probe_url = s.probe_url
            if probe_url:
                # Quick (gpuhost waits 2 s for the answer): one local GET, its result kept as it was.
                try:
                    with urllib.request.urlopen(probe_url, timeout=1) as answer:
                        probe = {"status": answer.status, "body": answer.read().decode("utf-8", "replace")}
                except urllib.error.HTTPError as e:
                    probe = {"status": e.code, "body": e.read().decode("utf-8", "replace")}
                except OSError as e:
                    probe = {"status": 0, "body": str(e)}
                with s.lock:
                    self.entry["probe"] = probe
            return self.reply(200, "")
        events = []
        with s.lock:
            if s.deadline:
                started = s.acknowledged or time.time() >= s.deadline
                events.append({
                    "EventId": s.event_id,
                    "EventType": "Reboot" if s.advisory else "Preempt",
                    "ResourceType": "VirtualMachine",
                    "Resources": [VM_NAME],
                    "EventStatus": "Started" if started else "Scheduled",
                    "NotBefore": "" if started else email.utils.formatdate(s.deadline, usegmt=True),
                    "Description": "",
                    "EventSource": "Platform",
                })
            document = {"DocumentIncarnation": s.version, "Events": events}
        self.reply(200, json.dumps(document), "application/json")

    # GCP instance/preempted, plain or as a hanging GET (research/02 §1.4).
    def cloud_gcp(self, method, path, query, body):
        s = self.state
        if self.headers.get("Metadata-Flavor") != "Google":
            return self.reply(403, "Missing Metadata-Flavor:Google header.")
        if method != "GET" or path != "/computeMetadata/v1/instance/preempted":
            return self.reply(404, "Not Found")
        if query.get("wait_for_change", [""])[0] == "true":
            with s.lock:
                seen = query.get("last_etag", [str(s.version)])[0]
                s.lock.wait_for(lambda: str(s.version) != seen, timeout=HANG_LIMIT_S)
        with s.lock:
            value = "TRUE" if s.deadline and not s.advisory else "FALSE"
            etag = str(s.version)
        self.reply(200, value, "application/text", {"ETag": etag})

    # Alibaba "Best practices for preemptible instances": UTC ISO-8601.
    def cloud_alibaba(self, method, path, query, body):
        if not self.token_ok(method, path, "X-aliyun-ecs-metadata-token-ttl-seconds", "X-aliyun-ecs-metadata-token"):
            return
        s = self.state
        if path == "/latest/meta-data/instance/spot/termination-time" and s.deadline:
            return self.reply(200, iso_utc(s.deadline))
        self.reply(404, "Not Found")

    # tencentcloud.com/document/product/213/32487: "2018-08-18 12:05:33", the guest's local time.
    def cloud_tencent(self, method, path, query, body):
        s = self.state
        if method == "GET" and path == "/latest/meta-data/spot/termination-time" and s.deadline:
            return self.reply(200, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.deadline)))
        self.reply(404, "Not Found")

    # volcengine.com/docs/6396/155893: "a time string"; UTC ISO-8601 here.
    def cloud_volcengine(self, method, path, query, body):
        s = self.state
        if method == "GET" and path == "/latest/spot_instance_termination_time" and s.deadline:
            return self.reply(200, iso_utc(s.deadline))
        self.reply(404, "Not Found")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cloud", required=True, choices=["aws", "azure", "gcp", "alibaba", "tencent", "volcengine"])
    args = parser.parse_args()
    Handler.state = State(args.cloud)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
