package nats

import "strings"

// A topic's subject is "<stream>.<topic with '.' replaced by '%'>": one token, because '.'
// separates NATS subject tokens and '%' never occurs in topic names. A message's payload is the
// publication, encoded by package replica.

func subject(stream, topic string) string {
	return stream + "." + strings.ReplaceAll(topic, ".", "%")
}

func topicOf(stream, subj string) (string, bool) {
	enc, ok := strings.CutPrefix(subj, stream+".")
	if !ok || enc == "" {
		return "", false
	}
	return strings.ReplaceAll(enc, "%", "."), true
}

// liveSubject is the subject topic's stored publications are republished on.
func liveSubject(l *streamLog, topic string) string {
	return l.live() + "." + strings.ReplaceAll(topic, ".", "%")
}
