#!/usr/bin/env python3
"""A loopback Pyroscope stand-in for bench/agent.sh: answers every POST with 200 (an empty PushResponse),
appends the arrival time (seconds since the epoch) of each to the file argv[1], and prints its port on
stdout once it listens."""
import http.server
import sys
import time

ARRIVALS = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(ARRIVALS, "a") as f:
            f.write("%.3f\n" % time.time())
        self.send_response(200)
        self.send_header("Content-Type", "application/proto")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
