package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Properties every case puts on its messages: the message's key (also its
// KEYS and the start of its body), its sequence number within its sharding
// key, and its body's length.
const (
	propKey = "basaltKey"
	propSeq = "basaltSeq"
	propLen = "basaltLen"
)

// settle is how long a consumer keeps listening after the last expected
// message, so that a late duplicate or a stray message is caught.
const settle = 3 * time.Second

func namesrvAddr(a caseArgs) primitive.NamesrvAddr {
	return primitive.NamesrvAddr{a.namesrv}
}

// newProducer starts a producer of its own client instance.
func newProducer(a caseArgs, group, instance string, opts ...producer.Option) (rocketmq.Producer, error) {
	all := append([]producer.Option{
		producer.WithNameServer(namesrvAddr(a)),
		producer.WithGroupName(group),
		producer.WithInstanceName(instance),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10 * time.Second),
	}, opts...)
	p, err := rocketmq.NewProducer(all...)
	if err != nil {
		return nil, fmt.Errorf("new producer %s: %w", group, err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("start producer %s: %w", group, err)
	}
	return p, nil
}

// newMessage builds message `key` of `topic` with tag (if any) and seq;
// its body is the key.
func newMessage(topic, key, tag string, seq int) *primitive.Message {
	return newSizedMessage(topic, key, tag, seq, len(key))
}

// body is `key` padded to `size` bytes with a pattern.
func body(key string, size int) []byte {
	b := []byte(key)
	for i := len(b); i < size; i++ {
		b = append(b, byte('a'+i%26))
	}
	return b
}

// newSizedMessage is newMessage with a body of `size` bytes (at least the
// key); the client compresses single bodies of 4 KiB and more.
func newSizedMessage(topic, key, tag string, seq, size int) *primitive.Message {
	b := body(key, size)
	m := primitive.NewMessage(topic, b)
	m.WithProperty(propLen, strconv.Itoa(len(b)))
	if tag != "" {
		m.WithTag(tag)
	}
	m.WithKeys([]string{key})
	m.WithProperty(propKey, key)
	m.WithProperty(propSeq, strconv.Itoa(seq))
	return m
}

// checkSent fails unless a sync send reported SEND_OK with a message id.
func checkSent(what string, r *primitive.SendResult, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if r.Status != primitive.SendOK {
		return fmt.Errorf("%s: status %d (%s)", what, r.Status, r.String())
	}
	if r.MsgID == "" || r.OffsetMsgID == "" {
		return fmt.Errorf("%s: no message id in %s", what, r.String())
	}
	return nil
}

// received is one message as a consumer saw it.
type received struct {
	by    string
	key   string
	tag   string
	seq   int
	queue int
	msg   *primitive.MessageExt
}

// collector records what the consumers of one check receive.
type collector struct {
	mu     sync.Mutex
	got    []received
	counts map[string]int
	// corrupt lists messages whose body is not the one sent.
	corrupt []string
	// want is the set of keys expected; done closes when all have arrived.
	want map[string]bool
	left int
	done chan struct{}
}

func newCollector(want []string) *collector {
	c := &collector{counts: map[string]int{}, want: map[string]bool{}, done: make(chan struct{})}
	for _, k := range want {
		c.want[k] = true
	}
	c.left = len(c.want)
	if c.left == 0 {
		close(c.done)
	}
	return c
}

// add records messages received by consumer `by`.
func (c *collector) add(by string, msgs ...*primitive.MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		key := m.GetProperty(propKey)
		seq, _ := strconv.Atoi(m.GetProperty(propSeq))
		r := received{by: by, key: key, tag: m.GetTags(), seq: seq, msg: m}
		if m.Queue != nil {
			r.queue = m.Queue.QueueId
		}
		c.got = append(c.got, r)
		size, _ := strconv.Atoi(m.GetProperty(propLen))
		if string(m.Body) != string(body(key, size)) {
			c.corrupt = append(c.corrupt, fmt.Sprintf("%s (%d bytes, want %d)", key, len(m.Body), size))
		}
		c.counts[key]++
		if c.counts[key] == 1 && c.want[key] {
			c.left--
			if c.left == 0 {
				close(c.done)
			}
		}
	}
}

// handler is a push consumer callback that records into c.
func (c *collector) handler(by string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		c.add(by, msgs...)
		return consumer.ConsumeSuccess, nil
	}
}

// await waits until every wanted key arrived (or `wait` passed), then
// `settle` more, and checks that each wanted key came exactly once and
// nothing else came. It prints what arrived.
func (c *collector) await(what string, wait time.Duration) error {
	select {
	case <-c.done:
	case <-time.After(wait):
	}
	time.Sleep(settle)
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing, dup, stray []string
	for k := range c.want {
		switch n := c.counts[k]; {
		case n == 0:
			missing = append(missing, k)
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s x%d", k, n))
		}
	}
	for k, n := range c.counts {
		if !c.want[k] {
			stray = append(stray, fmt.Sprintf("%s x%d", k, n))
		}
	}
	sort.Strings(missing)
	sort.Strings(dup)
	sort.Strings(stray)
	keys := make([]string, 0, len(c.got))
	for _, r := range c.got {
		keys = append(keys, r.key)
	}
	logf("%s: received %d (want %d): %s", what, len(c.got), len(c.want), summarize(keys))
	if len(missing)+len(dup)+len(stray)+len(c.corrupt) > 0 {
		return fmt.Errorf("%s: missing %v; duplicated %v; not expected %v; bodies not as sent %v",
			what, missing, dup, stray, c.corrupt)
	}
	return nil
}

// byConsumer counts the received messages per consumer.
func (c *collector) byConsumer() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, r := range c.got {
		out[r.by]++
	}
	return out
}

// newPushConsumer subscribes `expr` of `topic` for `group` on a client
// instance of its own and starts it.
func newPushConsumer(a caseArgs, group, instance, expr string, c *collector, opts ...consumer.Option) (rocketmq.PushConsumer, error) {
	all := append([]consumer.Option{
		consumer.WithNameServer(namesrvAddr(a)),
		consumer.WithGroupName(group),
		consumer.WithInstance(instance),
		consumer.WithConsumerModel(consumer.Clustering),
	}, opts...)
	pc, err := rocketmq.NewPushConsumer(all...)
	if err != nil {
		return nil, fmt.Errorf("new consumer %s/%s: %w", group, instance, err)
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: expr}
	if err := pc.Subscribe(a.topic, sel, c.handler(instance)); err != nil {
		return nil, fmt.Errorf("subscribe %s/%s: %w", group, instance, err)
	}
	if err := pc.Start(); err != nil {
		return nil, fmt.Errorf("start consumer %s/%s: %w", group, instance, err)
	}
	logf("consumer %s/%s started on %s (%s)", group, instance, a.topic, expr)
	return pc, nil
}
