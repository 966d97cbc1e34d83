"""tests/fake_metadata/server.py for one test: started on a free port, stopped at the test's
cleanup, driven through its /_control/ URLs. Standard library only."""
import json
import os
import subprocess
import sys
import urllib.request

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_metadata", "server.py")


class MetadataServer:
    def __init__(self, test, cloud, env=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen([sys.executable, SERVER, "--cloud", cloud], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=full_env)
        test.addCleanup(self.stop)
        self.port = json.loads(self.proc.stdout.readline())["port"]
        self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()

    def control(self, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + "/_control/" + path, data=data, method="POST" if data else "GET")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")

    def log(self):
        return self.control("log")

    def acknowledgements(self):
        """The requests that acknowledged a notice (Azure StartRequests)."""
        return [e for e in self.log() if e.get("acknowledged")]
