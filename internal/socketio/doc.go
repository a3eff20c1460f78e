// Package socketio is a client of Socket.IO v4 servers, written for the load lab: it speaks
// Engine.IO protocol v4 (EIO=4) and, over it, Socket.IO protocol v5, which socket.io 3 and 4
// servers speak, as do python-socketio 5 and socketioxide. The tests run socket.io 4.8.1
// (test/socketio). Servers of Socket.IO 2 (EIO=3) are not supported.
//
// Supported:
//   - Transports: HTTP long-polling (payloads of several packets separated by 0x1e, one POST
//     at a time as the server requires), WebSocket from the start, and long-polling upgraded
//     to WebSocket (probe "2probe"/"3probe", then "5") as the JS client does by default.
//   - One namespace per Conn: CONNECT with an auth payload; a refusal (CONNECT_ERROR from the
//     namespace's middleware) is a *ConnectError with the server's message.
//   - Events with JSON arguments both ways (Emit, Read), and acknowledgements of the client's
//     events (EmitAck).
//   - Heartbeat: the server pings every pingInterval and the client answers each ping; Read
//     fails when no ping came within pingInterval+pingTimeout of the last one.
//   - TLS (https, wss) and a caller's dialer, for source-address spreading.
//
// Not supported: binary packets (BINARY_EVENT, BINARY_ACK, binary WebSocket messages and
// "b"-prefixed polling packets are an ErrBinary error), acknowledging the server's events
// (they are returned by Read, never acknowledged), several namespaces on one session,
// reconnection, connection state recovery, cookies (sticky sessions by cookie need Header),
// and the WebTransport transport.
//
// Bad input from a server (malformed or unknown packets, payloads over MaxPayload) makes
// Read or Dial return an error, never panic; the connection is then closed.
//
// Memory per connection is small: one TCP connection and a 1 KiB read buffer on WebSocket;
// an http.Transport with at most two connections on polling. Packets are allocated as read.
package socketio
