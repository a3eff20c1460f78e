"""Drives stomp.py with its default transport (STOMP over plain TCP) against rtlab's
--stomp-addr listener, then round-trips frames through stomp.py's own frame parser.

usage: python stomppy.py HOST PORT TOKEN FRAMES_FILE
Prints one line per check and PASS at the end; exits non-zero on the first failure.
FRAMES_FILE holds frames encoded by rtlab's codec, each preceded by its length and a newline;
their parsed form is printed as JSON lines on stdout after the line FRAMES.
"""
import json
import queue
import sys
import time

import stomp
from stomp import utils

host, port, token, frames_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


def fail(msg):
    print("FAIL " + msg, flush=True)
    sys.exit(1)


class Inbox(stomp.ConnectionListener):
    def __init__(self):
        self.q = queue.Queue()

    def on_message(self, frame):
        self.q.put(frame)

    def on_error(self, frame):
        self.q.put(frame)

    def next(self):
        try:
            return self.q.get(timeout=10)
        except queue.Empty:
            fail("no message within 10 s")


def connect(hb=(0, 0)):
    c = stomp.Connection12([(host, port)], heartbeats=hb)
    inbox = Inbox()
    c.set_listener("inbox", inbox)
    c.connect(passcode=token, wait=True, headers={"accept-version": "1.2"})
    return c, inbox


a, ina = connect()
b, _ = connect(hb=(1000, 1000))
print("ok connected over TCP", flush=True)

# Resume: SUBSCRIBE with since=1 replays what followed offset 1, then live messages follow.
a.subscribe("/topic/py/room", id="s1", ack="auto", headers={"since": "1"})
m = ina.next()
if m.headers.get("offset") != "2" or json.loads(m.body)["n"] != 2:
    fail("replay: %r %r" % (m.headers, m.body))
print("ok subscribe with since replays", flush=True)

b.send("/topic/py/room", json.dumps({"n": 3}), content_type="application/json")
m = ina.next()
if m.headers.get("offset") != "3" or json.loads(m.body)["n"] != 3:
    fail("live: %r %r" % (m.headers, m.body))
if ":" not in m.headers.get("time", ""):
    fail("time header %r" % m.headers.get("time"))
print("ok publish and receive; sender %s" % m.headers.get("sender"), flush=True)

time.sleep(3)  # b promised heart-beats every second: stomp.py sends them, the session lives
b.send("/topic/py/room", json.dumps({"n": 4}), content_type="application/json")
if json.loads(ina.next().body)["n"] != 4:
    fail("after heart-beats")
print("ok heart-beats kept the session", flush=True)
a.disconnect()
b.disconnect()

# Frames encoded by rtlab, parsed by stomp.py's parser.
print("FRAMES", flush=True)
data = open(frames_file, "rb").read()
i = 0
while i < len(data):
    nl = data.index(b"\n", i)
    n = int(data[i:nl])
    raw = data[nl + 1:nl + 1 + n]
    i = nl + 1 + n
    f = utils.parse_frame(raw[:-1])  # without the NUL, as stomp.py's transport hands frames on
    print(json.dumps({"command": f.cmd, "headers": f.headers, "body": f.body.decode("utf-8", "surrogateescape")}), flush=True)
print("PASS", flush=True)
