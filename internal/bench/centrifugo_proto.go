package bench

import (
	"net/url"
	"strconv"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rtlab/rtlab/internal/jsonscan"
)

// Centrifugo's client protocol in JSON (its client protocol v2), as much of it as a client that
// connects, subscribes with recovery, publishes and receives needs. Commands carry an id; the
// server answers each with a reply of the same id, and sends pushes (publications, disconnects)
// without one. Over WebSocket a frame may hold several messages separated by newlines; an empty
// object is the server's ping, answered with an empty object when the connect reply says
// "pong". The unidirectional transports (here SSE) send pushes only, not wrapped in "push".
// Like msgparse.go, the scanner picks out what the accounting needs without unmarshalling.

// Command ids: connect and subscribe have their own, publication seq is sent as cfPubID+seq.
const (
	cfConnectID   = 1
	cfSubscribeID = 2
	cfPubID       = 16
)

// cfMsg is one Centrifugo message. Byte slices point into the input.
type cfMsg struct {
	id    uint32
	empty bool // {}: a ping

	err     bool // a reply with an error
	errCode uint32
	errMsg  []byte

	connect bool // a connect reply, or the unidirectional connect push
	pong    bool // the client answers pings

	sub           bool   // a subscribe result (unidirectional: the first of the connect's subs)
	subChannel    []byte // unidirectional: the channel of that subscription
	epoch         []byte // of the subscription, or of a publication (sometimes)
	offset        uint64 // of the subscription's stream, or of a publication
	recovered     bool
	wasRecovering bool
	pubs          []byte // the subscribe result's recovered publications: a JSON array, raw

	publish bool // a publish reply

	pub     bool // a publication push
	channel []byte
	data    dataFields

	disconnect  bool // a disconnect or unsubscribe push: the server ends the connection or subscription
	unsubscribe bool
	code        uint32
	reason      []byte
}

// parseCf scans one Centrifugo message.
func parseCf(b []byte, m *cfMsg) error {
	*m = cfMsg{}
	keys := 0
	_, err := walkObject(b, 0, func(key, val []byte) error {
		keys++
		return m.member(key, val)
	})
	m.empty = err == nil && keys == 0
	return err
}

// member reads one member of a reply or push.
func (m *cfMsg) member(key, val []byte) error {
	switch string(key) {
	case "id":
		n, err := strconv.ParseUint(string(val), 10, 32)
		if err != nil {
			return errJSON
		}
		m.id = uint32(n)
	case "error":
		m.err = true
		return cfObject(val, func(k, v []byte) error {
			switch string(k) {
			case "code":
				m.errCode = cfUint32(v)
			case "message":
				m.errMsg = unquote(v)
			}
			return nil
		})
	case "connect":
		m.connect = true
		return cfObject(val, func(k, v []byte) error {
			switch string(k) {
			case "pong":
				m.pong = string(v) == "true"
			case "subs":
				// A unidirectional client is subscribed by the server: its subscriptions come
				// with the connect push. The bench asks for one channel.
				return cfObject(v, func(ch, res []byte) error {
					if m.sub {
						return nil
					}
					m.sub, m.subChannel = true, ch
					return m.subscribeResult(res)
				})
			}
			return nil
		})
	case "subscribe":
		m.sub = true
		return m.subscribeResult(val)
	case "publish":
		m.publish = true
	case "push":
		return cfObject(val, m.member)
	case "channel":
		m.channel = unquote(val)
	case "pub":
		m.pub = true
		return m.publication(val)
	case "disconnect", "unsubscribe":
		m.disconnect = true
		m.unsubscribe = string(key) == "unsubscribe"
		return cfObject(val, func(k, v []byte) error {
			switch string(k) {
			case "code":
				m.code = cfUint32(v)
			case "reason":
				m.reason = unquote(v)
			}
			return nil
		})
	}
	return nil
}

// subscribeResult reads a SubscribeResult.
func (m *cfMsg) subscribeResult(val []byte) error {
	return cfObject(val, func(k, v []byte) error {
		switch string(k) {
		case "epoch":
			m.epoch = unquote(v)
		case "offset":
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return errJSON
			}
			m.offset = n
		case "recovered":
			m.recovered = string(v) == "true"
		case "was_recovering":
			m.wasRecovering = string(v) == "true"
		case "publications":
			m.pubs = v
		}
		return nil
	})
}

// publication reads a Publication: its data, offset and (sometimes) epoch.
func (m *cfMsg) publication(val []byte) error {
	return cfObject(val, func(k, v []byte) error {
		switch string(k) {
		case "data":
			m.data = parseData(v)
		case "offset":
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return errJSON
			}
			m.offset = n
		case "epoch":
			m.epoch = unquote(v)
		}
		return nil
	})
}

// cfObject walks a JSON object value (a member's raw value); anything else is malformed.
func cfObject(val []byte, fn func(key, val []byte) error) error {
	end, err := walkObject(val, 0, fn)
	if err == nil && jsonscan.SkipWS(val, end) != len(val) {
		err = errJSON
	}
	return err
}

// cfUint32 reads a small unsigned number, 0 when it is not one.
func cfUint32(v []byte) uint32 {
	n, _ := strconv.ParseUint(string(v), 10, 32)
	return uint32(n)
}

// eachCfPublication calls fn with each publication of a subscribe result's array.
func eachCfPublication(arr []byte, fn func(p *cfMsg, raw []byte)) error {
	if len(arr) == 0 {
		return nil
	}
	var p cfMsg
	return eachElement(arr, func(elem []byte) error {
		p = cfMsg{}
		if err := p.publication(elem); err != nil {
			return err
		}
		fn(&p, elem)
		return nil
	})
}

// appendCfConnect appends a connect command, with a token when there is one.
func appendCfConnect(dst []byte, token string) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, cfConnectID, 10)
	dst = append(dst, `,"connect":{`...)
	if token != "" {
		dst = append(dst, `"token":"`...)
		dst = append(dst, token...)
		dst = append(dst, `",`...)
	}
	return append(dst, `"name":"rtlab-bench"}}`...)
}

// appendCfSubscribe appends a subscribe command; with recover it asks for what was published
// after offset in epoch (a resubscription after a drop).
func appendCfSubscribe(dst []byte, channel string, recover bool, offset uint64, epoch string) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, cfSubscribeID, 10)
	dst = append(dst, `,"subscribe":{"channel":"`...)
	dst = append(dst, channel...)
	dst = append(dst, '"')
	if recover {
		dst = append(dst, ',')
		dst = appendCfRecover(dst, offset, epoch)
	}
	return append(dst, `}}`...)
}

// appendCfRecover appends the members of a recovering SubscribeRequest.
func appendCfRecover(dst []byte, offset uint64, epoch string) []byte {
	dst = append(dst, `"recover":true,"offset":`...)
	dst = strconv.AppendUint(dst, offset, 10)
	dst = append(dst, `,"epoch":"`...)
	dst = append(dst, epoch...)
	return append(dst, '"')
}

// appendCfPublish appends a publish command for publication seq; data is a JSON value.
func appendCfPublish(dst []byte, seq int, channel string, data []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, int64(cfPubID+seq), 10)
	dst = append(dst, `,"publish":{"channel":"`...)
	dst = append(dst, channel...)
	dst = append(dst, `","data":`...)
	dst = append(dst, data...)
	return append(dst, `}}`...)
}

// cfUniConnect is the cf_connect query value of a unidirectional connection: the token, and
// after a drop the subscription to recover from offset in epoch.
func cfUniConnect(token, channel string, recover bool, offset uint64, epoch string) string {
	b := append(make([]byte, 0, 256), '{')
	if token != "" {
		b = append(b, `"token":"`...)
		b = append(b, token...)
		b = append(b, `"`...)
	}
	if recover {
		if token != "" {
			b = append(b, ',')
		}
		b = append(b, `"subs":{"`...)
		b = append(b, channel...)
		b = append(b, `":{`...)
		b = appendCfRecover(b, offset, epoch)
		b = append(b, `}}`...)
	}
	b = append(b, '}')
	return url.QueryEscape(string(b))
}

// cfToken returns an HS256 connection token for user, valid until exp (Unix seconds). A
// unidirectional client gets its channels in the token: it cannot subscribe itself.
func cfToken(secret []byte, user string, channels []string, exp int64) string {
	claims := jwt.MapClaims{"sub": user, "exp": exp}
	if len(channels) > 0 {
		claims["channels"] = channels
	}
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	return tok
}
