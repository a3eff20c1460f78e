package nats

import (
	"context"
	"errors"
	"fmt"
	"github.com/rtlab/rtlab/internal/state"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// State is a state.Store in a JetStream key-value bucket (file storage, one revision kept per key).
// A key is "<kind>.<name>" with every byte of the name outside [-/_A-Za-z0-9] written as =XX,
// since KV keys allow few characters and '.' separates tokens. Create and Update(revision)
// are JetStream's own compare-and-set; the revision is the bucket stream's sequence.
type State struct {
	nc *natsgo.Conn // closed by Close when the store dialed it; nil when it shares the broker's
	kv jetstream.KeyValue
}

var _ state.Store = (*State)(nil)

// OpenState connects to the NATS server at url and creates the bucket if needed. A node opens
// its store with Open instead, on its broker's connection.
func OpenState(ctx context.Context, url, bucket string) (*State, error) {
	nc, err := natsgo.Connect(url, natsgo.Name("rtlab-state"), natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250*time.Millisecond), natsgo.ReconnectBufSize(-1))
	if err != nil {
		return nil, fmt.Errorf("state: nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("state: nats: %w", err)
	}
	st, err := openState(ctx, js, bucket)
	if err != nil {
		nc.Close()
		return nil, err
	}
	st.nc = nc
	return st, nil
}

// openState creates the bucket if needed, on js's connection, which it does not own.
func openState(ctx context.Context, js jetstream.JetStream, bucket string) (*State, error) {
	var kv jetstream.KeyValue
	// Nodes starting together race to create it, and JetStream may leave one unanswered.
	err := askAgainUnanswered(ctx, func(ctx context.Context) (err error) {
		cfg := jetstream.KeyValueConfig{
			Bucket: bucket, Description: "rtlab chat rooms and revoked tokens", History: 1,
			Storage: jetstream.FileStorage, MaxValueSize: state.MaxValue,
		}
		// Create first, as createOrUpdateStream does and for the same reason: an update racing
		// another node's create crashes nats-server 2.9.
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.UpdateKeyValue(ctx, cfg)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("state: nats bucket %s: %w", bucket, err)
	}
	return &State{kv: kv}, nil
}

// natsKey escapes name into a KV key under kind.
func natsKey(kind, name string) string {
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte('.')
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '/' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// natsName undoes natsKey's escaping of a key's name part.
func natsName(key string) string {
	_, esc, _ := strings.Cut(key, ".")
	var b strings.Builder
	for i := 0; i < len(esc); i++ {
		if esc[i] == '=' && i+2 < len(esc) {
			var v byte
			for _, h := range esc[i+1 : i+3] {
				v <<= 4
				switch {
				case '0' <= h && h <= '9':
					v |= byte(h - '0')
				case 'A' <= h && h <= 'F':
					v |= byte(h-'A') + 10
				}
			}
			b.WriteByte(v)
			i += 2
			continue
		}
		b.WriteByte(esc[i])
	}
	return b.String()
}

func (n *State) Get(ctx context.Context, kind, name string) (state.Record, error) {
	e, err := n.kv.Get(ctx, natsKey(kind, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return state.Record{}, nil
	}
	if err != nil {
		return state.Record{}, fmt.Errorf("state: nats: %w", err)
	}
	return state.Record{Value: e.Value(), Rev: e.Revision()}, nil
}

func (n *State) Put(ctx context.Context, kind, name string, value []byte, rev uint64) (uint64, error) {
	if len(value) > state.MaxValue {
		return 0, state.ErrTooLarge
	}
	key := natsKey(kind, name)
	var (
		r   uint64
		err error
	)
	if rev == 0 {
		r, err = n.kv.Create(ctx, key, value)
	} else {
		r, err = n.kv.Update(ctx, key, value, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, state.ErrConflict
	}
	if err != nil {
		return 0, fmt.Errorf("state: nats: %w", err)
	}
	return r, nil
}

func (n *State) Delete(ctx context.Context, kind, name string) error {
	if err := n.kv.Purge(ctx, natsKey(kind, name)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("state: nats: %w", err)
	}
	return nil
}

func (n *State) List(ctx context.Context, kind string, fn func(string, []byte)) error {
	w, err := n.kv.Watch(ctx, kind+".>", jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("state: nats: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return nil // the initial values are done
			}
			fn(natsName(e.Key()), e.Value())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close closes the store's own connection; one shared with the broker is the broker's to close.
func (n *State) Close() error {
	if n.nc != nil {
		n.nc.Close()
	}
	return nil
}
