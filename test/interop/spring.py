"""Drives stomp.py (STOMP over TCP) through the Spring destinations of docs/spring.md:
/queue/* broadcast, SUBSCRIBE to /app/... answered once, refused SENDs on /user/queue/errors,
login/passcode.

usage: python spring.py OPEN_HOST OPEN_PORT AUTH_HOST AUTH_PORT TOKEN
Prints one line per check and PASS; exits non-zero on the first failure.
"""
import json
import queue
import sys
import time

import stomp

oh, op, ah, ap, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]


def fail(msg):
    print("FAIL " + msg, flush=True)
    sys.exit(1)


class Inbox(stomp.ConnectionListener):
    def __init__(self):
        self.q = queue.Queue()

    def on_message(self, frame):
        self.q.put(frame)

    def on_receipt(self, frame):
        self.q.put(frame)

    def on_error(self, frame):
        self.q.put(frame)

    def next(self):
        try:
            return self.q.get(timeout=10)
        except queue.Empty:
            fail("no frame within 10 s")


def connect(host, port, login, passcode):
    c = stomp.Connection12([(host, port)])
    inbox = Inbox()
    c.set_listener("inbox", inbox)
    c.connect(login, passcode, wait=True, headers={"accept-version": "1.2"})
    return c, inbox


a, ina = connect(oh, op, "guest", "guest")
b, _ = connect(oh, op, "guest", "guest")
print("ok login/passcode guest accepted without auth", flush=True)

a.subscribe("/queue/orders", id="q", ack="client-individual", headers={"receipt": "q"})
if ina.next().cmd != "RECEIPT":
    fail("subscribe receipt")
b.send("/queue/orders", json.dumps({"order": 1}), content_type="application/json")
m = ina.next()
if m.cmd != "MESSAGE" or json.loads(m.body)["order"] != 1 or m.headers["destination"] != "/queue/orders":
    fail("queue: %r %r" % (m.headers, m.body))
mid = m.headers["message-id"]
if ":" not in mid:
    fail("message-id %r" % mid)
a.ack(m.headers["ack"], "q", receipt="acked")
if ina.next().cmd != "RECEIPT":
    fail("ACK refused")
print("ok /queue/orders broadcast, message-id %s acknowledged" % mid, flush=True)

a.subscribe("/app/init", id="init")
m = ina.next()
if m.cmd != "MESSAGE" or json.loads(m.body)["hello"] != "anonymous":
    fail("subscribe reply %r %r" % (m.headers, m.body))
print("ok SUBSCRIBE /app/init answered once", flush=True)
a.disconnect()
b.disconnect()

c, inc = connect(ah, ap, "ann", token)
c.subscribe("/user/queue/errors", id="e", headers={"receipt": "e"})
if inc.next().cmd != "RECEIPT":
    fail("errors subscribe")
c.send("/app/refuse", "{}", headers={"receipt": "refused"})
m, r = inc.next(), inc.next()
if m.cmd != "MESSAGE" or "no handler for /app/refuse" not in json.loads(m.body)["reason"]:
    fail("errors queue %r %r" % (m.headers, m.body))
if r.cmd != "RECEIPT" or r.headers.get("refused") != "forbidden":
    fail("receipt %r" % r.headers)
c.subscribe("/topic/public", id="p", headers={"receipt": "p"})
inc.next()
c.send("/app/chat.send", json.dumps({"text": "still here"}))
m = inc.next()
if m.cmd != "MESSAGE" or json.loads(m.body)["text"] != "still here":
    fail("after a refusal %r %r" % (m.headers, m.body))
print("ok refused SEND on /user/queue/errors, session kept", flush=True)
c.disconnect()

try:
    g, ing = connect(ah, ap, "guest", "guest")
    fail("guest connected with auth on")
except stomp.exception.ConnectFailedException:
    pass
print("ok passcode guest refused with auth on", flush=True)
print("PASS", flush=True)
