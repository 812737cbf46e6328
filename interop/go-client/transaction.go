package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// txListener decides each half message by its key: `commit` keys commit at
// once, `rollback` keys roll back, `check` keys answer unknown and commit
// when the broker checks back (CHECK_TRANSACTION_STATE).
type txListener struct {
	mu      sync.Mutex
	checked map[string]int
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	key := m.GetProperty(propKey)
	switch {
	case strings.Contains(key, "-commit-"):
		return primitive.CommitMessageState
	case strings.Contains(key, "-rollback-"):
		return primitive.RollbackMessageState
	default:
		return primitive.UnkonwnState
	}
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	key := m.GetProperty(propKey)
	l.mu.Lock()
	l.checked[key]++
	l.mu.Unlock()
	logf("broker checked back %s", key)
	if strings.Contains(key, "-check-") {
		return primitive.CommitMessageState
	}
	// Only undecided messages are checked; anything else stays undecided
	// and shows up as a check of a key that was decided.
	return primitive.UnkonwnState
}

// runTransaction sends n half messages of each kind (commit, rollback,
// check) with a transaction producer; a consumer must receive exactly the
// committed ones and the checked ones (after the broker checked back), and
// never a rolled-back one. Needs a broker with short transaction check
// settings (transactionCheckInterval, transactionTimeOut).
func runTransaction(a caseArgs) error {
	var want []string
	var all []string
	for _, kind := range []string{"commit", "rollback", "check"} {
		for i := 0; i < a.n; i++ {
			key := fmt.Sprintf("%s-%s-%d", a.prefix, kind, i)
			all = append(all, key)
			if kind != "rollback" {
				want = append(want, key)
			}
		}
	}
	col := newCollector(want)
	c, err := newPushConsumer(a, a.prefix+"-tx", "tx-consumer", "*", col)
	if err != nil {
		return err
	}
	defer c.Shutdown()
	l := &txListener{checked: map[string]int{}}
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNameServer(namesrvAddr(a)),
		producer.WithGroupName(a.prefix+"-tx-producer"),
		producer.WithInstanceName("tx-producer"),
	)
	if err != nil {
		return fmt.Errorf("new transaction producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("start transaction producer: %w", err)
	}
	defer p.Shutdown()
	for i, key := range all {
		r, err := p.SendMessageInTransaction(context.Background(), newMessage(a.topic, key, "", i))
		if err != nil {
			return fmt.Errorf("half message %s: %w", key, err)
		}
		if r.Status != primitive.SendOK {
			return fmt.Errorf("half message %s: status %d", key, r.Status)
		}
		logf("sent half message %s -> local state %d", key, r.State)
	}
	if err := col.await("transaction consumer", a.wait); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range all {
		n := l.checked[key]
		if strings.Contains(key, "-check-") && n == 0 {
			return fmt.Errorf("%s arrived without a check-back", key)
		}
		if !strings.Contains(key, "-check-") && n > 0 {
			return fmt.Errorf("%s was decided at once but checked back %d times", key, n)
		}
	}
	logf("checked back: %v", l.checked)
	return nil
}
