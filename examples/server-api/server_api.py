"""rtlab's server API from Python (docs/protocol.md, "Server API for backends").

Run: RTLAB_API_KEY=... python3 examples/server-api/server_api.py   (needs `requests`)
"""
import os

import requests


def rtlab(call, **body):
    r = requests.post(f"http://127.0.0.1:8080/api/server/{call}", json=body,
                      headers={"Authorization": "apikey " + os.environ["RTLAB_API_KEY"]}, timeout=10)
    if r.status_code != 200:
        e = r.json()
        raise RuntimeError(f"rtlab {call}: {e.get('error')}: {e.get('reason')}")
    return r.json()


if __name__ == "__main__":
    print(rtlab("publish", topic="notify/ann", data={"message": "hi"}, type="NOTIFY"))
    print(rtlab("disconnect", user="ann", reason="account suspended"))
    print(rtlab("presence", topic="chat/lobby"))
