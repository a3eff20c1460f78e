"""Mints tokens with PyJWT, as an application's Python backend would. Reads a JSON list of
{alg, key, kid, claims} on stdin (key: the secret, or a PEM private key) and prints the tokens
as a JSON list."""
import json
import sys

import jwt

specs = json.load(sys.stdin)
tokens = [
    jwt.encode(s["claims"], s["key"], algorithm=s["alg"], headers={"kid": s["kid"]} if s.get("kid") else None)
    for s in specs
]
json.dump(tokens, sys.stdout)
