// A Socket.IO v4 server of the lab's "location" shape, for internal/socketio's tests and as a
// target to measure. A client joins room g{n} (query ?group=n, or a `join` event with n) and
// emits `location` with a JSON object; the server sends it as `location` to everyone in the
// client's rooms, the sender included, and acknowledges it when asked. Namespace /secure refuses a CONNECT whose auth.token is
// not "good" with the message "not authorized".
//
// Usage: node server.js [--port 0] [--host 127.0.0.1] [--ping-interval ms] [--ping-timeout ms]
// It prints "listening <port>" once it accepts connections.
"use strict";
const http = require("http");
const { Server } = require("socket.io");

function arg(name, def) {
  const i = process.argv.indexOf("--" + name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}

const httpServer = http.createServer();
const io = new Server(httpServer, {
  pingInterval: Number(arg("ping-interval", 25000)),
  pingTimeout: Number(arg("ping-timeout", 20000)),
});

function join(socket, group) {
  const n = Number.parseInt(group, 10);
  if (Number.isInteger(n) && n >= 0) {
    socket.join("g" + n);
    return true;
  }
  return false;
}

function location(socket) {
  socket.on("location", (msg, ack) => {
    for (const room of socket.rooms) {
      if (/^g\d+$/.test(room)) io.of(socket.nsp.name).to(room).emit("location", msg);
    }
    if (typeof ack === "function") ack("sent");
  });
  socket.on("join", (group, ack) => {
    const ok = join(socket, group);
    if (typeof ack === "function") ack(ok ? "joined" : "bad group");
  });
  if (socket.handshake.query.group !== undefined) join(socket, socket.handshake.query.group);
}

io.on("connection", location);
io.of("/secure").use((socket, next) => {
  if (socket.handshake.auth && socket.handshake.auth.token === "good") return next();
  next(new Error("not authorized"));
});
io.of("/secure").on("connection", location);

httpServer.listen(Number(arg("port", 0)), arg("host", "127.0.0.1"), () => {
  console.log("listening " + httpServer.address().port);
});
process.on("SIGTERM", () => process.exit(0));
