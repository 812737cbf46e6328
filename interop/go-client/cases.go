package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

var tags = []string{"TagA", "TagB", "TagC"}

// sentMsg is one message a case sent.
type sentMsg struct {
	key string
	tag string
}

// runModes sends n messages in each of the four send modes with tags
// TagA/TagB/TagC in turn (every fourth with a 6 KiB body), to two clustering consumers of one group on `*`
// (together each message once, each some) and one consumer of another
// group on `TagA || TagB` (exactly those).
func runModes(a caseArgs) error {
	all := &collector{}
	tagged := &collector{}
	var consumers []rocketmq.PushConsumer
	defer func() {
		for _, c := range consumers {
			_ = c.Shutdown()
		}
	}()
	// The collectors learn their wanted keys before anything is sent.
	sent := plannedModes(a)
	var allKeys, tagKeys []string
	for _, m := range sent {
		allKeys = append(allKeys, m.key)
		if m.tag == "TagA" || m.tag == "TagB" {
			tagKeys = append(tagKeys, m.key)
		}
	}
	*all = *newCollector(allKeys)
	*tagged = *newCollector(tagKeys)
	groupAll, groupTags := a.prefix+"-all", a.prefix+"-tags"
	for _, inst := range []string{"all-1", "all-2"} {
		c, err := newPushConsumer(a, groupAll, inst, "*", all)
		if err != nil {
			return err
		}
		consumers = append(consumers, c)
	}
	c, err := newPushConsumer(a, groupTags, "tags-1", "TagA || TagB", tagged)
	if err != nil {
		return err
	}
	consumers = append(consumers, c)
	// Let the second consumer's arrival reach the first (the broker
	// notifies it, it rebalances) before anything is sent.
	time.Sleep(3 * time.Second)
	if err := sendModes(a, sent); err != nil {
		return err
	}
	if err := all.await("group "+groupAll, a.wait); err != nil {
		return err
	}
	if err := tagged.await("group "+groupTags+" (TagA || TagB)", a.wait); err != nil {
		return err
	}
	if err := checkTags(all, sent); err != nil {
		return err
	}
	share := all.byConsumer()
	logf("group %s: all-1 received %d, all-2 received %d", groupAll, share["all-1"], share["all-2"])
	if share["all-1"] == 0 || share["all-2"] == 0 {
		return fmt.Errorf("group %s: the two consumers did not share the topic: %v", groupAll, share)
	}
	return nil
}

// plannedModes lists the messages runModes sends: n per mode.
func plannedModes(a caseArgs) []sentMsg {
	var out []sentMsg
	for _, mode := range []string{"sync", "async", "oneway", "batch"} {
		for i := 0; i < a.n; i++ {
			key := fmt.Sprintf("%s-%s-%d", a.prefix, mode, i)
			out = append(out, sentMsg{key: key, tag: tags[i%len(tags)]})
		}
	}
	return out
}

// sendModes sends the planned messages: the first quarter one by one with
// SendSync, the next with SendAsync, then SendOneWay, and the last quarter
// as one batch.
func sendModes(a caseArgs, sent []sentMsg) error {
	p, err := newProducer(a, a.prefix+"-producer", "modes-producer")
	if err != nil {
		return err
	}
	defer p.Shutdown()
	ctx := context.Background()
	// Every fourth message has a 6 KiB body, which the client compresses
	// (not in the batch: the client never compresses a batch).
	msg := func(m sentMsg, i int) *primitive.Message {
		size := len(m.key)
		if i%4 == 3 {
			size = 6 * 1024
		}
		return newSizedMessage(a.topic, m.key, m.tag, i, size)
	}
	n := a.n
	for i, m := range sent[:n] {
		r, err := p.SendSync(ctx, msg(m, i))
		if err := checkSent("sync send "+m.key, r, err); err != nil {
			return err
		}
		logf("sent sync %s tag %s -> queue %d offset %d id %s", m.key, m.tag, r.MessageQueue.QueueId, r.QueueOffset, r.MsgID)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var asyncErrs []string
	for i, m := range sent[n : 2*n] {
		wg.Add(1)
		key := m.key
		err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err := checkSent("async send "+key, r, err); err != nil {
				asyncErrs = append(asyncErrs, err.Error())
				return
			}
			logf("sent async %s -> queue %d offset %d", key, r.MessageQueue.QueueId, r.QueueOffset)
		}, msg(m, i))
		if err != nil {
			return fmt.Errorf("async send %s: %w", key, err)
		}
	}
	if !waitGroup(&wg, 30*time.Second) {
		return fmt.Errorf("async sends: not every callback came within 30 s")
	}
	if len(asyncErrs) > 0 {
		return fmt.Errorf("async sends failed: %s", strings.Join(asyncErrs, "; "))
	}
	for i, m := range sent[2*n : 3*n] {
		if err := p.SendOneWay(ctx, msg(m, i)); err != nil {
			return fmt.Errorf("oneway send %s: %w", m.key, err)
		}
	}
	logf("sent oneway %d messages", n)
	var batch []*primitive.Message
	for i, m := range sent[3*n:] {
		batch = append(batch, msg(m, i))
	}
	r, err := p.SendSync(ctx, batch...)
	if err != nil {
		return fmt.Errorf("batch send: %w", err)
	}
	if r.Status != primitive.SendOK {
		return fmt.Errorf("batch send: status %d (%s)", r.Status, r.String())
	}
	// The client gives batched messages no unique id (its MsgID is empty);
	// the broker's answer has one offset id per message.
	if ids := strings.Split(r.OffsetMsgID, ","); len(ids) != len(batch) {
		return fmt.Errorf("batch send: %d offset message ids for %d messages: %s", len(ids), len(batch), r.OffsetMsgID)
	}
	logf("sent batch of %d -> queue %d offset %d", len(batch), r.MessageQueue.QueueId, r.QueueOffset)
	return nil
}

// checkTags fails when a received message's tag is not the one it was
// sent with.
func checkTags(c *collector, sent []sentMsg) error {
	want := map[string]string{}
	for _, m := range sent {
		want[m.key] = m.tag
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.got {
		if r.tag != want[r.key] {
			return fmt.Errorf("%s arrived with tag %q, sent with %q", r.key, r.tag, want[r.key])
		}
	}
	return nil
}

func waitGroup(wg *sync.WaitGroup, limit time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}

// runOrderly sends n messages for each of 4 sharding keys, interleaved,
// through the hash queue selector, to an orderly consumer that must see
// each key's messages exactly once and in the order sent.
func runOrderly(a caseArgs) error {
	shards := []string{"order-a", "order-b", "order-c", "order-d"}
	var want []string
	for i := 0; i < a.n; i++ {
		for _, s := range shards {
			want = append(want, fmt.Sprintf("%s-%s-%d", a.prefix, s, i))
		}
	}
	col := newCollector(want)
	c, err := newPushConsumer(a, a.prefix+"-orderly", "orderly-1", "*", col, consumer.WithConsumerOrder(true))
	if err != nil {
		return err
	}
	defer c.Shutdown()
	p, err := newProducer(a, a.prefix+"-orderly-producer", "orderly-producer",
		producer.WithQueueSelector(producer.NewHashQueueSelector()))
	if err != nil {
		return err
	}
	defer p.Shutdown()
	queueOf := map[string]int{}
	for i := 0; i < a.n; i++ {
		for _, s := range shards {
			key := fmt.Sprintf("%s-%s-%d", a.prefix, s, i)
			m := newMessage(a.topic, key, "", i)
			m.WithShardingKey(s)
			r, err := p.SendSync(context.Background(), m)
			if err := checkSent("orderly send "+key, r, err); err != nil {
				return err
			}
			q, seen := queueOf[s]
			if seen && q != r.MessageQueue.QueueId {
				return fmt.Errorf("sharding key %s went to queue %d and %d", s, q, r.MessageQueue.QueueId)
			}
			queueOf[s] = r.MessageQueue.QueueId
		}
	}
	logf("sent %d messages for keys %v; queues %v", len(want), shards, queueOf)
	if err := col.await("orderly group", a.wait); err != nil {
		return err
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	next := map[string]int{}
	for _, r := range col.got {
		shard := strings.Split(strings.TrimPrefix(r.key, a.prefix+"-"), "-")
		s := shard[0] + "-" + shard[1]
		if r.seq != next[s] {
			return fmt.Errorf("key %s: got seq %d (%s) where %d was next", s, r.seq, r.key, next[s])
		}
		next[s]++
	}
	logf("each of %d keys arrived in order: %v", len(shards), next)
	return nil
}

// runPull sends n messages, then a pull consumer (Subscribe + Poll/ACK)
// of a new group reads the topic from its first offset: each once.
func runPull(a caseArgs) error {
	want, err := produceKeys(a, a.prefix+"-pull")
	if err != nil {
		return err
	}
	col := newCollector(want)
	pc, err := rocketmq.NewPullConsumer(
		consumer.WithNameServer(namesrvAddr(a)),
		consumer.WithGroupName(a.prefix+"-pull"),
		consumer.WithInstance("pull-1"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return fmt.Errorf("new pull consumer: %w", err)
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}
	if err := pc.Subscribe(a.topic, sel); err != nil {
		return fmt.Errorf("pull subscribe: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("pull consumer start: %w", err)
	}
	defer pc.Shutdown()
	deadline := time.Now().Add(a.wait)
	polls := 0
	for time.Now().Before(deadline) {
		select {
		case <-col.done:
			deadline = time.Now()
			continue
		default:
		}
		cr, err := pc.Poll(context.Background(), 2*time.Second)
		polls++
		if consumer.IsNoNewMsgError(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		col.add("pull-1", cr.GetMsgList()...)
		pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	logf("pull consumer: %d polls", polls)
	return col.await("pull group", time.Millisecond)
}

// runDelay sends three messages at delay level 2 (5 s) to a consumer that
// must receive each once, none sooner than 5 s after it was sent.
func runDelay(a caseArgs) error {
	const level, delay = 2, 5 * time.Second
	var want []string
	for i := 0; i < 3; i++ {
		want = append(want, fmt.Sprintf("%s-delay-%d", a.prefix, i))
	}
	col := newCollector(want)
	arrived := map[string]time.Time{}
	var mu sync.Mutex
	pc, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer(namesrvAddr(a)),
		consumer.WithGroupName(a.prefix+"-delay"),
		consumer.WithInstance("delay-1"),
	)
	if err != nil {
		return fmt.Errorf("new consumer: %w", err)
	}
	err = pc.Subscribe(a.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			for _, m := range msgs {
				arrived[m.GetProperty(propKey)] = time.Now()
			}
			mu.Unlock()
			col.add("delay-1", msgs...)
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("start consumer: %w", err)
	}
	defer pc.Shutdown()
	p, err := newProducer(a, a.prefix+"-delay-producer", "delay-producer")
	if err != nil {
		return err
	}
	defer p.Shutdown()
	sentAt := map[string]time.Time{}
	for i, key := range want {
		m := newMessage(a.topic, key, "", i).WithDelayTimeLevel(level)
		sentAt[key] = time.Now()
		r, err := p.SendSync(context.Background(), m)
		if err := checkSent("delayed send "+key, r, err); err != nil {
			return err
		}
		logf("sent %s at delay level %d -> queue %d", key, level, r.MessageQueue.QueueId)
	}
	if err := col.await("delay group", a.wait); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for _, key := range want {
		after := arrived[key].Sub(sentAt[key])
		logf("%s arrived %.1f s after it was sent", key, after.Seconds())
		if after < delay {
			return fmt.Errorf("%s arrived %v after it was sent, before its delay of %v", key, after, delay)
		}
	}
	return nil
}

// produceKeys sends n messages keyed <prefix>-0..n-1 with SendSync and
// returns their keys.
func produceKeys(a caseArgs, group string) ([]string, error) {
	p, err := newProducer(a, group+"-producer", group+"-producer")
	if err != nil {
		return nil, err
	}
	defer p.Shutdown()
	var keys []string
	queues := map[int]int{}
	for i := 0; i < a.n; i++ {
		key := fmt.Sprintf("%s-%d", a.prefix, i)
		r, err := p.SendSync(context.Background(), newMessage(a.topic, key, "", i))
		if err := checkSent("send "+key, r, err); err != nil {
			return nil, err
		}
		queues[r.MessageQueue.QueueId]++
		keys = append(keys, key)
	}
	logf("sent %d messages %s; per queue %v", len(keys), summarize(keys), sortedCounts(queues))
	return keys, nil
}

func sortedCounts(m map[int]int) string {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("q%d:%d", id, m[id]))
	}
	return strings.Join(parts, " ")
}

// runProduce sends n messages keyed <prefix>-0..n-1.
func runProduce(a caseArgs) error {
	_, err := produceKeys(a, "produce-"+a.prefix)
	return err
}

// runConsume starts a push consumer of -group (from the first offset when
// the group has none) that must receive exactly <prefix>-0..n-1, then
// shuts it down, which commits its offsets.
func runConsume(a caseArgs) error {
	if a.group == "" {
		return fmt.Errorf("consume needs -group")
	}
	var want []string
	for i := 0; i < a.n; i++ {
		want = append(want, fmt.Sprintf("%s-%d", a.prefix, i))
	}
	col := newCollector(want)
	c, err := newPushConsumer(a, a.group, "consume-"+a.prefix, "*", col,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		return err
	}
	err = col.await("group "+a.group, a.wait)
	if serr := c.Shutdown(); serr != nil && err == nil {
		err = fmt.Errorf("shutdown: %w", serr)
	}
	return err
}

// runRetry sends n messages to a consumer that fails each on its first
// delivery (ConsumeRetryLater, which sends it back through
// CONSUMER_SEND_MSG_BACK): each must come back exactly once, from the
// group's retry topic, with reconsumeTimes 1.
func runRetry(a caseArgs) error {
	var want []string
	for i := 0; i < a.n; i++ {
		want = append(want, fmt.Sprintf("%s-retry-%d", a.prefix, i))
	}
	first := newCollector(want)
	again := newCollector(want)
	group := a.prefix + "-retry"
	pc, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer(namesrvAddr(a)),
		consumer.WithGroupName(group),
		consumer.WithInstance("retry-1"),
	)
	if err != nil {
		return fmt.Errorf("new consumer: %w", err)
	}
	var badReconsume []string
	var mu sync.Mutex
	err = pc.Subscribe(a.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				if m.ReconsumeTimes == 0 {
					first.add("retry-1", m)
					result = consumer.ConsumeRetryLater
					continue
				}
				again.add("retry-1", m)
				if m.ReconsumeTimes != 1 || m.GetProperty(primitive.PropertyRetryTopic) != a.topic {
					mu.Lock()
					badReconsume = append(badReconsume, fmt.Sprintf("%s reconsumeTimes %d retry topic %q",
						m.GetProperty(propKey), m.ReconsumeTimes, m.GetProperty(primitive.PropertyRetryTopic)))
					mu.Unlock()
				}
			}
			return result, nil
		})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("start consumer: %w", err)
	}
	defer pc.Shutdown()
	if _, err := produceKeys(caseArgs{namesrv: a.namesrv, topic: a.topic, prefix: a.prefix + "-retry", n: a.n}, group); err != nil {
		return err
	}
	if err := first.await("first deliveries (each failed)", a.wait); err != nil {
		return err
	}
	if err := again.await("redeliveries", a.wait); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if len(badReconsume) > 0 {
		return fmt.Errorf("redeliveries not marked as retries: %v", badReconsume)
	}
	return nil
}
