package main

import (
	"context"
	"fmt"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// receiveInvisible is the invisible time of the receives that ack at once.
const receiveInvisible = 20 * time.Second

// received is one message as a case saw it.
type received struct {
	id      string
	body    string
	tag     string
	keys    []string
	props   map[string]string
	group   string
	attempt int32
	born    time.Time
	due     time.Time
	at      time.Time
}

// receiveExactly receives and acks until expected messages came (or
// deadline passed), then makes sure nothing more comes for settle. It
// returns them in arrival order and fails on a duplicate message id, a
// failed receive or ack, or a count other than expected.
func receiveExactly(label string, c rmq.SimpleConsumer, expected int, deadline, settle time.Duration) ([]received, error) {
	var got []received
	ids := map[string]bool{}
	end := time.Now().Add(deadline)
	for len(got) < expected && time.Now().Before(end) {
		views, err := receive(c, 16, receiveInvisible)
		if err != nil {
			return got, fmt.Errorf("%s: receive: %w", label, err)
		}
		for _, m := range views {
			r := describe(m)
			fmt.Printf("RECV %s id=%s body=%s tag=%s group=%s attempt=%d\n", label, r.id, r.body,
				str(m.GetTag()), r.group, r.attempt)
			if ids[r.id] {
				return got, fmt.Errorf("%s: duplicate message %s", label, r.id)
			}
			ids[r.id] = true
			got = append(got, r)
			if err := c.Ack(context.Background(), m); err != nil {
				return got, fmt.Errorf("%s: ack %s: %w", label, r.id, err)
			}
		}
	}
	settleEnd := time.Now().Add(settle)
	for time.Now().Before(settleEnd) {
		views, err := receive(c, 16, receiveInvisible)
		if err != nil {
			return got, fmt.Errorf("%s: receive while settling: %w", label, err)
		}
		for _, m := range views {
			fmt.Printf("RECV %s EXTRA id=%s body=%s attempt=%d\n", label, m.GetMessageId(), m.GetBody(),
				m.GetDeliveryAttempt())
			_ = c.Ack(context.Background(), m)
		}
		if len(views) > 0 {
			return got, fmt.Errorf("%s: received more than the %d messages expected", label, expected)
		}
	}
	fmt.Printf("COUNT %s received=%d expected=%d\n", label, len(got), expected)
	if len(got) != expected {
		return got, fmt.Errorf("%s: received %d of %d", label, len(got), expected)
	}
	return got, nil
}

// receive is one receive; an empty one (MESSAGE_NOT_FOUND) is no error.
func receive(c rmq.SimpleConsumer, max int32, invisible time.Duration) ([]*rmq.MessageView, error) {
	views, err := c.Receive(context.Background(), max, invisible)
	if err != nil {
		if isEmpty(err) {
			return nil, nil
		}
		return nil, err
	}
	return views, nil
}

// receiveOne receives until one message comes (at most deadline), asking
// for one at a time.
func receiveOne(c rmq.SimpleConsumer, invisible, deadline time.Duration) (*rmq.MessageView, error) {
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		views, err := receive(c, 1, invisible)
		if err != nil {
			return nil, err
		}
		if len(views) > 1 {
			return nil, fmt.Errorf("asked for one message, got %d", len(views))
		}
		if len(views) == 1 {
			return views[0], nil
		}
	}
	return nil, fmt.Errorf("no message within %v", deadline)
}

func describe(m *rmq.MessageView) received {
	r := received{
		id:      m.GetMessageId(),
		body:    string(m.GetBody()),
		tag:     str(m.GetTag()),
		keys:    m.GetKeys(),
		props:   m.GetProperties(),
		group:   str(m.GetMessageGroup()),
		attempt: m.GetDeliveryAttempt(),
		at:      time.Now(),
	}
	if b := m.GetBornTimestamp(); b != nil {
		r.born = *b
	}
	if d := m.GetDeliveryTimestamp(); d != nil {
		r.due = *d
	}
	return r
}

// send sends m and prints its receipt.
func send(label string, p rmq.Producer, m *rmq.Message) error {
	receipts, err := p.Send(context.Background(), m)
	if err != nil {
		return fmt.Errorf("%s: send %s: %w", label, short(m.Body), err)
	}
	if len(receipts) != 1 {
		return fmt.Errorf("%s: send %s: %d receipts", label, short(m.Body), len(receipts))
	}
	fmt.Printf("SENT %s id=%s body=%s\n", label, receipts[0].MessageID, short(m.Body))
	return nil
}

// short is a body for printing: at most 64 bytes of it.
func short(body []byte) string {
	if len(body) > 64 {
		return fmt.Sprintf("%q... (%d bytes)", body[:64], len(body))
	}
	return string(body)
}

// message is a message of topic with a tag and keys.
func message(topic, body, tag string, keys ...string) *rmq.Message {
	m := &rmq.Message{Topic: topic, Body: []byte(body)}
	if tag != "" {
		m.SetTag(tag)
	}
	if len(keys) > 0 {
		m.SetKeys(keys...)
	}
	return m
}
