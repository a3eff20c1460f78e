// Mints tokens with node's jsonwebtoken, as an application's Node backend would. Reads a JSON
// list of {alg, key, kid, claims} on stdin (key: the secret, or a PEM private key) and prints
// the tokens as a JSON list.
import jwt from "jsonwebtoken";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const specs = JSON.parse(input);
const tokens = specs.map(({ alg, key, kid, claims }) =>
  jwt.sign(claims, key, { algorithm: alg, ...(kid ? { keyid: kid } : {}) }));
process.stdout.write(JSON.stringify(tokens));
