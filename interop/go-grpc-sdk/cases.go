package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// caseNormal: 20 normal messages, each received and acked exactly once.
func caseNormal() error {
	const t, n = "go-normal", 20
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c, err := consumer("gg-normal", t)
	if err != nil {
		return err
	}
	defer stop("consumer", c)
	var sent []string
	for i := 0; i < n; i++ {
		b := fmt.Sprintf("normal-%d", i)
		m := message(t, b, "tagA", fmt.Sprintf("key-%d", i), "both")
		m.AddProperty("index", fmt.Sprint(i))
		if err := send("normal", p, m); err != nil {
			return err
		}
		sent = append(sent, b)
	}
	got, err := receiveExactly("normal", c, n, 60*time.Second, 6*time.Second)
	if err != nil {
		return err
	}
	// What each message carried besides its body came back as sent.
	for _, r := range got {
		i := strings.TrimPrefix(r.body, "normal-")
		want := fmt.Sprintf("tag=tagA keys=[key-%s both] index=%s group=", i, i)
		have := fmt.Sprintf("tag=%s keys=%v index=%s group=%s", r.tag, r.keys, r.props["index"], r.group)
		if have != want {
			return fmt.Errorf("normal: %s came back with %s, sent with %s", r.body, have, want)
		}
		if r.born.IsZero() || time.Since(r.born) > time.Minute || time.Until(r.born) > time.Second {
			return fmt.Errorf("normal: %s has born timestamp %v", r.body, r.born)
		}
	}
	return sameBodies("normal", sent, got)
}

// caseFilter: nine messages of tags tagA, tagB, tagC with a user property
// index 0..8; a tag consumer of "tagA || tagB" gets exactly the six
// tagA/tagB ones, a SQL92 consumer of "index >= 5" exactly the last four
// (each group gets its own copy).
func caseFilter() error {
	const t = "go-filter"
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	byTag, err := consumerOf("gg-filter-tag", t, rmq.NewFilterExpression("tagA || tagB"))
	if err != nil {
		return err
	}
	defer stop("tag consumer", byTag)
	bySQL, err := consumerOf("gg-filter-sql", t, rmq.NewFilterExpressionWithType("index >= 5", rmq.SQL92))
	if err != nil {
		return err
	}
	defer stop("sql consumer", bySQL)
	var wantTag, wantSQL []string
	for i := 0; i < 9; i++ {
		tag := []string{"tagA", "tagB", "tagC"}[i%3]
		b := fmt.Sprintf("filter-%d-%s", i, tag)
		m := message(t, b, tag)
		m.AddProperty("index", fmt.Sprint(i))
		if err := send("filter", p, m); err != nil {
			return err
		}
		if tag != "tagC" {
			wantTag = append(wantTag, b)
		}
		if i >= 5 {
			wantSQL = append(wantSQL, b)
		}
	}
	got, err := receiveExactly("filter-tag", byTag, len(wantTag), 60*time.Second, 6*time.Second)
	if err != nil {
		return err
	}
	if err := sameBodies("filter-tag", wantTag, got); err != nil {
		return err
	}
	got, err = receiveExactly("filter-sql", bySQL, len(wantSQL), 60*time.Second, 6*time.Second)
	if err != nil {
		return err
	}
	return sameBodies("filter-sql", wantSQL, got)
}

// caseFifo: three message groups of five; each group arrives in send order.
func caseFifo() error {
	const t = "go-fifo"
	groups := []string{"ga", "gb", "gc"}
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c, err := consumer("gg-fifo", t)
	if err != nil {
		return err
	}
	defer stop("consumer", c)
	for i := 0; i < 5; i++ {
		for _, g := range groups {
			m := message(t, fmt.Sprintf("%s:%d", g, i), "f")
			m.SetMessageGroup(g)
			if err := send("fifo", p, m); err != nil {
				return err
			}
		}
	}
	got, err := receiveExactly("fifo", c, 15, 60*time.Second, 6*time.Second)
	if err != nil {
		return err
	}
	byGroup := map[string][]string{}
	for _, r := range got {
		g := strings.SplitN(r.body, ":", 2)[0]
		if r.group != g {
			return fmt.Errorf("fifo: %s came with message group %q", r.body, r.group)
		}
		byGroup[g] = append(byGroup[g], r.body)
	}
	for _, g := range groups {
		want := make([]string, 0, 5)
		for i := 0; i < 5; i++ {
			want = append(want, fmt.Sprintf("%s:%d", g, i))
		}
		fmt.Printf("ORDER fifo group=%s got=%v\n", g, byGroup[g])
		if strings.Join(byGroup[g], ",") != strings.Join(want, ",") {
			return fmt.Errorf("fifo: group %s out of order: %v", g, byGroup[g])
		}
	}
	return nil
}

// caseDelay: three messages due 3 s after sending; none arrives early,
// nor more than 8 s late.
func caseDelay() error {
	const t = "go-delay"
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c, err := consumer("gg-delay", t)
	if err != nil {
		return err
	}
	defer stop("consumer", c)
	due := time.Now().Add(3 * time.Second)
	var sent []string
	for i := 0; i < 3; i++ {
		b := fmt.Sprintf("delay-%d", i)
		m := message(t, b, "d")
		m.SetDelayTimestamp(due)
		if err := send("delay", p, m); err != nil {
			return err
		}
		sent = append(sent, b)
	}
	got, err := receiveExactly("delay", c, 3, 60*time.Second, 4*time.Second)
	if err != nil {
		return err
	}
	for _, r := range got {
		if r.due.UnixMilli() != due.UnixMilli() {
			return fmt.Errorf("delay: %s came back due %v, sent due %v", r.body, r.due, due)
		}
		early := due.Sub(r.at)
		fmt.Printf("TIMING delay body=%s due=%s received=%s\n", r.body, due.Format(time.StampMilli),
			r.at.Format(time.StampMilli))
		// The broker's timer works in whole ticks: allow it a little.
		if early > 200*time.Millisecond {
			return fmt.Errorf("delay: %s received %v before its delivery time", r.body, early)
		}
		// Nor long after (a loaded machine may delay the broker's timer).
		if -early > 8*time.Second {
			return fmt.Errorf("delay: %s received %v after its delivery time", r.body, -early)
		}
	}
	return sameBodies("delay", sent, got)
}

// checked records the broker's transaction check-backs.
var checked = struct {
	sync.Mutex
	bodies []string
}{}

// resolve is the transaction checker: it commits check-commit-*, answers
// UNKNOWN the first time it sees check-unknown-* and commits it after, and
// rolls back anything else.
func resolve(m *rmq.MessageView) rmq.TransactionResolution {
	b := string(m.GetBody())
	checked.Lock()
	seen := 0
	for _, c := range checked.bodies {
		if c == b {
			seen++
		}
	}
	checked.bodies = append(checked.bodies, b)
	checked.Unlock()
	fmt.Printf("CHECK transaction id=%s body=%s (check %d)\n", m.GetMessageId(), b, seen+1)
	switch {
	case strings.HasPrefix(b, "check-commit"):
		return rmq.COMMIT
	case strings.HasPrefix(b, "check-unknown") && seen == 0:
		return rmq.UNKNOWN
	case strings.HasPrefix(b, "check-unknown"):
		return rmq.COMMIT
	}
	return rmq.ROLLBACK
}

// caseTransaction: one half message committed, one rolled back, and three
// left open for the broker's check-back (the checker commits one, rolls
// back one, and answers UNKNOWN for the third before committing it on the
// next check): exactly the three committed ones arrive.
func caseTransaction() error {
	const t = "go-transaction"
	p, err := producer(t, &rmq.TransactionChecker{Check: resolve})
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c, err := consumer("gg-transaction", t)
	if err != nil {
		return err
	}
	defer stop("consumer", c)
	commit := p.BeginTransaction()
	if err := sendHalf(p, t, "commit-1", commit); err != nil {
		return err
	}
	if err := commit.Commit(); err != nil {
		return fmt.Errorf("transaction: commit: %w", err)
	}
	rollback := p.BeginTransaction()
	if err := sendHalf(p, t, "rollback-1", rollback); err != nil {
		return err
	}
	if err := rollback.RollBack(); err != nil {
		return fmt.Errorf("transaction: rollback: %w", err)
	}
	for _, b := range []string{"check-commit-1", "check-rollback-1", "check-unknown-1"} {
		if err := sendHalf(p, t, b, p.BeginTransaction()); err != nil {
			return err
		}
	}
	got, err := receiveExactly("transaction", c, 3, 90*time.Second, 8*time.Second)
	if err != nil {
		return err
	}
	want := []string{"commit-1", "check-commit-1", "check-unknown-1"}
	if err := sameBodies("transaction", want, got); err != nil {
		return err
	}
	checked.Lock()
	defer checked.Unlock()
	fmt.Printf("COUNT transaction checked=%v\n", checked.bodies)
	seen := map[string]int{}
	for _, b := range checked.bodies {
		seen[b]++
	}
	if seen["check-commit-1"] == 0 || seen["check-rollback-1"] == 0 {
		return fmt.Errorf("transaction: the broker checked %v, not every open one", checked.bodies)
	}
	if seen["check-unknown-1"] < 2 {
		return fmt.Errorf("transaction: check-unknown-1 checked %d times, not again after UNKNOWN",
			seen["check-unknown-1"])
	}
	if seen["commit-1"] > 0 || seen["rollback-1"] > 0 {
		return fmt.Errorf("transaction: the broker checked an ended transaction: %v", checked.bodies)
	}
	return nil
}

func sendHalf(p rmq.Producer, topic, body string, tx rmq.Transaction) error {
	receipts, err := p.SendWithTransaction(context.Background(), message(topic, body, "tx"), tx)
	if err != nil {
		return fmt.Errorf("transaction: send %s: %w", body, err)
	}
	for _, r := range receipts {
		fmt.Printf("SENT transaction id=%s body=%s (half, transaction %s)\n", r.MessageID, body, r.TransactionId)
	}
	return nil
}

// caseInvisible: a message not acked comes back after its 10 s invisible
// time with delivery attempt 2, and not again once acked.
func caseInvisible() error {
	const t = "go-invisible"
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c, err := consumer("gg-invisible", t)
	if err != nil {
		return err
	}
	defer stop("consumer", c)
	if err := send("invisible", p, message(t, "invisible-1", "i", "k")); err != nil {
		return err
	}
	first, err := receiveOne(c, 10*time.Second, 30*time.Second)
	if err != nil {
		return fmt.Errorf("invisible: first receive: %w", err)
	}
	at := time.Now()
	fmt.Printf("RECV invisible id=%s body=%s attempt=%d (not acked)\n", first.GetMessageId(), first.GetBody(),
		first.GetDeliveryAttempt())
	if first.GetDeliveryAttempt() != 1 {
		return fmt.Errorf("invisible: first delivery attempt is %d", first.GetDeliveryAttempt())
	}
	again, err := receiveOne(c, 10*time.Second, 40*time.Second)
	if err != nil {
		return fmt.Errorf("invisible: second receive: %w", err)
	}
	after := time.Since(at)
	fmt.Printf("RECV invisible id=%s body=%s attempt=%d after %d ms\n", again.GetMessageId(), again.GetBody(),
		again.GetDeliveryAttempt(), after.Milliseconds())
	if again.GetMessageId() != first.GetMessageId() {
		return fmt.Errorf("invisible: %s came back, not %s", again.GetMessageId(), first.GetMessageId())
	}
	if again.GetDeliveryAttempt() != 2 {
		return fmt.Errorf("invisible: delivery attempt %d the second time", again.GetDeliveryAttempt())
	}
	if after < 8*time.Second {
		return fmt.Errorf("invisible: back after %v, before its 10 s invisible time", after)
	}
	if err := c.Ack(context.Background(), again); err != nil {
		return fmt.Errorf("invisible: ack: %w", err)
	}
	_, err = receiveExactly("invisible-after-ack", c, 0, 0, 12*time.Second)
	return err
}

// caseChangeInvisible: a message received with 60 s invisible, changed to
// 2 s, comes back long before 60 s (an ack with the replaced receipt handle
// does not keep it away); acked with the new handle it does not come back
// again.
func caseChangeInvisible() error {
	const t = "go-change-invisible"
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c, err := consumer("gg-change-invisible", t)
	if err != nil {
		return err
	}
	defer stop("consumer", c)
	if err := send("change-invisible", p, message(t, "change-1", "c", "k")); err != nil {
		return err
	}
	first, err := receiveOne(c, 60*time.Second, 30*time.Second)
	if err != nil {
		return fmt.Errorf("change-invisible: first receive: %w", err)
	}
	fmt.Printf("RECV change-invisible id=%s body=%s attempt=%d (60 s invisible)\n", first.GetMessageId(),
		first.GetBody(), first.GetDeliveryAttempt())
	at := time.Now()
	// The view as received: the SDK puts the new handle into first.
	stale := *first
	if err := c.ChangeInvisibleDuration(first, 2*time.Second); err != nil {
		return fmt.Errorf("change-invisible: change: %w", err)
	}
	fmt.Printf("CHANGED change-invisible id=%s to 2 s (new receipt handle: %v)\n", first.GetMessageId(),
		first.GetReceiptHandle() != stale.GetReceiptHandle())
	if first.GetReceiptHandle() == stale.GetReceiptHandle() {
		return fmt.Errorf("change-invisible: the change gave no new receipt handle")
	}
	// An ack with the handle the change replaced must not ack the message
	// (the SDK returns no error either way: it ignores the ack's status).
	_ = c.Ack(context.Background(), &stale)
	fmt.Printf("ACKED change-invisible id=%s with the replaced handle\n", stale.GetMessageId())
	again, err := receiveOne(c, 20*time.Second, 40*time.Second)
	if err != nil {
		return fmt.Errorf("change-invisible: second receive: %w", err)
	}
	after := time.Since(at)
	fmt.Printf("RECV change-invisible id=%s body=%s attempt=%d after %d ms\n", again.GetMessageId(),
		again.GetBody(), again.GetDeliveryAttempt(), after.Milliseconds())
	if again.GetMessageId() != first.GetMessageId() {
		return fmt.Errorf("change-invisible: %s came back, not %s", again.GetMessageId(), first.GetMessageId())
	}
	if after >= 30*time.Second {
		return fmt.Errorf("change-invisible: back only after %v", after)
	}
	if again.GetDeliveryAttempt() != 2 {
		return fmt.Errorf("change-invisible: delivery attempt %d the second time", again.GetDeliveryAttempt())
	}
	if err := c.Ack(context.Background(), again); err != nil {
		return fmt.Errorf("change-invisible: ack: %w", err)
	}
	_, err = receiveExactly("change-invisible-after-ack", c, 0, 0, 24*time.Second)
	return err
}

// sameBodies fails unless got holds exactly the bodies sent (any order).
func sameBodies(label string, sent []string, got []received) error {
	var bodies []string
	for _, r := range got {
		bodies = append(bodies, r.body)
	}
	want := append([]string(nil), sent...)
	sort.Strings(want)
	sort.Strings(bodies)
	if strings.Join(want, "\n") != strings.Join(bodies, "\n") {
		return fmt.Errorf("%s: sent %v, received %v", label, want, bodies)
	}
	return nil
}

// caseShared: two SimpleConsumers of one group receive 30 messages at the
// same time: together they get each exactly once.
func caseShared() error {
	const t, g, n = "go-shared", "gg-shared", 30
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c1, err := consumer(g, t)
	if err != nil {
		return err
	}
	defer stop("consumer 1", c1)
	c2, err := consumer(g, t)
	if err != nil {
		return err
	}
	defer stop("consumer 2", c2)
	var sent []string
	for i := 0; i < n; i++ {
		b := fmt.Sprintf("shared-%d", i)
		if err := send("shared", p, message(t, b, "s")); err != nil {
			return err
		}
		sent = append(sent, b)
	}
	var mu sync.Mutex
	var got []received
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	errs := make(chan error, 2)
	for k, c := range []rmq.SimpleConsumer{c1, c2} {
		go func(label string, c rmq.SimpleConsumer) {
			end := time.Now().Add(60 * time.Second)
			for total() < n && time.Now().Before(end) {
				views, err := receive(c, 4, receiveInvisible)
				if err != nil {
					errs <- fmt.Errorf("%s: receive: %w", label, err)
					return
				}
				for _, m := range views {
					r := describe(m)
					fmt.Printf("RECV %s id=%s body=%s attempt=%d\n", label, r.id, r.body, r.attempt)
					if err := c.Ack(context.Background(), m); err != nil {
						errs <- fmt.Errorf("%s: ack %s: %w", label, r.id, err)
						return
					}
					mu.Lock()
					got = append(got, r)
					mu.Unlock()
				}
			}
			errs <- nil
		}(fmt.Sprintf("shared-%d", k+1), c)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	// Nothing more for either (a duplicate would show here or in the count).
	for k, c := range []rmq.SimpleConsumer{c1, c2} {
		label := fmt.Sprintf("shared-%d-after", k+1)
		if _, err := receiveExactly(label, c, 0, 0, 6*time.Second); err != nil {
			return err
		}
	}
	fmt.Printf("COUNT shared received=%d expected=%d\n", len(got), n)
	return sameBodies("shared", sent, got)
}

// caseBadInput: a send to a topic that does not exist and one over the
// broker's size limit are refused; a good send works after them.
func caseBadInput() error {
	const t = "go-bad-input"
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	if err := send("bad-input", p, message("go-no-such-topic", "x", "t")); err == nil {
		return fmt.Errorf("bad-input: a send to an unknown topic succeeded")
	} else {
		fmt.Printf("REFUSED bad-input unknown topic: %v\n", err)
	}
	big := &rmq.Message{Topic: t, Body: make([]byte, 4*1024*1024+1)}
	if err := send("bad-input", p, big); err == nil {
		return fmt.Errorf("bad-input: an oversized message was taken")
	} else {
		fmt.Printf("REFUSED bad-input oversized: %v\n", err)
	}
	return send("bad-input", p, message(t, "after-bad-input", "t"))
}

// caseAnyQueue: a receive right after start is empty, without error; then
// eight times, one message is sent and one Receive call must return it. The SDK names the next queue of the route in each receive
// while the broker put the message on any of the topic's four: a receive
// has to read every queue (as the proxy's does), not only the named one.
func caseAnyQueue() error {
	const t = "go-any-queue"
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c, err := consumer("gg-any-queue", t)
	if err != nil {
		return err
	}
	defer stop("consumer", c)
	// Right after Start, before the SDK sent its settings (a second
	// later): an empty receive is empty, not a call past its deadline.
	views, err := receive(c, 16, receiveInvisible)
	if err != nil {
		return fmt.Errorf("any-queue: a receive right after start: %w", err)
	}
	fmt.Printf("RECV any-queue right after start: %d messages\n", len(views))
	if len(views) != 0 {
		return fmt.Errorf("any-queue: %d messages before any was sent", len(views))
	}
	for i := 0; i < 8; i++ {
		b := fmt.Sprintf("any-queue-%d", i)
		if err := send("any-queue", p, message(t, b, "q")); err != nil {
			return err
		}
		views, err := receive(c, 16, receiveInvisible)
		if err != nil {
			return fmt.Errorf("any-queue: receive: %w", err)
		}
		var bodies []string
		for _, m := range views {
			bodies = append(bodies, string(m.GetBody()))
			if err := c.Ack(context.Background(), m); err != nil {
				return fmt.Errorf("any-queue: ack: %w", err)
			}
		}
		fmt.Printf("RECV any-queue one receive after sending %s: %v\n", b, bodies)
		if len(bodies) != 1 || bodies[0] != b {
			return fmt.Errorf("any-queue: one receive after sending %s returned %v", b, bodies)
		}
	}
	return nil
}

// caseOrderly: the group gg-orderly is orderly (the test creates it with
// consumeMessageOrderly); three messages of one message group. While the
// first is received and not acked, a receive gets nothing of the group;
// after its ack the rest come, in order, each once.
func caseOrderly() error {
	const t, g = "go-orderly", "gg-orderly"
	p, err := producer(t, nil)
	if err != nil {
		return err
	}
	defer stop("producer", p)
	c, err := consumer(g, t)
	if err != nil {
		return err
	}
	defer stop("consumer", c)
	want := []string{"ga:0", "ga:1", "ga:2"}
	for _, b := range want {
		m := message(t, b, "o")
		m.SetMessageGroup("ga")
		if err := send("orderly", p, m); err != nil {
			return err
		}
	}
	first, err := receiveOne(c, 20*time.Second, 30*time.Second)
	if err != nil {
		return fmt.Errorf("orderly: first receive: %w", err)
	}
	fmt.Printf("RECV orderly id=%s body=%s attempt=%d (not acked yet)\n", first.GetMessageId(), first.GetBody(),
		first.GetDeliveryAttempt())
	if string(first.GetBody()) != want[0] {
		return fmt.Errorf("orderly: first came %s", first.GetBody())
	}
	held, err := receive(c, 16, receiveInvisible)
	if err != nil {
		return fmt.Errorf("orderly: receive while the first is held: %w", err)
	}
	for _, m := range held {
		fmt.Printf("RECV orderly WHILE HELD id=%s body=%s\n", m.GetMessageId(), m.GetBody())
	}
	if len(held) != 0 {
		return fmt.Errorf("orderly: %d messages of the group came while the first was not acked", len(held))
	}
	if err := c.Ack(context.Background(), first); err != nil {
		return fmt.Errorf("orderly: ack: %w", err)
	}
	rest, err := receiveExactly("orderly", c, 2, 60*time.Second, 6*time.Second)
	if err != nil {
		return err
	}
	got := []string{string(first.GetBody())}
	for _, r := range rest {
		got = append(got, r.body)
	}
	fmt.Printf("ORDER orderly got=%v\n", got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("orderly: out of order: %v", got)
	}
	return nil
}
