// Command server-api publishes a notification and disconnects a user through rtlab's server API
// (docs/protocol.md, "Server API for backends"). Run: RTLAB_API_KEY=... go run ./examples/server-api/go
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
)

// rtlab POSTs body to /api/server/{call} and decodes the answer into out; a non-200 answer
// becomes an error carrying the server's {"error","reason"}.
func rtlab(call string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest("POST", "http://127.0.0.1:8080/api/server/"+call, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "apikey "+os.Getenv("RTLAB_API_KEY"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var e struct{ Error, Reason string }
		_ = json.NewDecoder(res.Body).Decode(&e)
		return fmt.Errorf("rtlab %s: %s: %s", call, e.Error, e.Reason)
	}
	return json.NewDecoder(res.Body).Decode(out)
}

func main() {
	var ack struct {
		Offset uint64
		Epoch  string
	}
	if err := rtlab("publish", map[string]any{"topic": "notify/ann", "type": "NOTIFY", "data": map[string]string{"message": "hi"}}, &ack); err != nil {
		log.Fatal(err)
	}
	fmt.Println("published at offset", ack.Offset, "epoch", ack.Epoch)
	var gone struct{ Disconnected int }
	if err := rtlab("disconnect", map[string]any{"user": "ann", "reason": "account suspended"}, &gone); err != nil {
		log.Fatal(err)
	}
	fmt.Println("closed", gone.Disconnected, "connections")
}
