package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// runAdmin drives the client's admin API: it creates -topic on -broker
// with 6 queues, finds it in the route and the NameServer's topic list,
// finds a group a consumer's heartbeat created among the broker's
// subscription groups, then deletes the topic and finds it gone. The
// admin API decodes answers with Go's strict JSON decoder.
func runAdmin(a caseArgs) error {
	if a.broker == "" {
		return fmt.Errorf("admin needs -broker")
	}
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{a.namesrv})))
	if err != nil {
		return fmt.Errorf("new admin: %w", err)
	}
	defer adm.Close()
	ctx := context.Background()
	err = adm.CreateTopic(ctx, admin.WithTopicCreate(a.topic), admin.WithBrokerAddrCreate(a.broker),
		admin.WithReadQueueNums(6), admin.WithWriteQueueNums(6))
	if err != nil {
		return fmt.Errorf("create topic %s: %w", a.topic, err)
	}
	logf("created topic %s on %s with 6 queues", a.topic, a.broker)
	mqs, err := adm.FetchPublishMessageQueues(ctx, a.topic)
	if err != nil {
		return fmt.Errorf("route of %s: %w", a.topic, err)
	}
	logf("route of %s: %d write queues", a.topic, len(mqs))
	if len(mqs) != 6 {
		return fmt.Errorf("route of %s has %d queues, want 6: %v", a.topic, len(mqs), mqs)
	}
	if err := expectTopicListed(ctx, adm, a.topic, true); err != nil {
		return err
	}
	if err := expectGroupListed(ctx, adm, a); err != nil {
		return err
	}
	if err := adm.DeleteTopic(ctx, admin.WithTopicDelete(a.topic), admin.WithBrokerAddrDelete(a.broker)); err != nil {
		return fmt.Errorf("delete topic %s: %w", a.topic, err)
	}
	logf("deleted topic %s", a.topic)
	return expectTopicListed(ctx, adm, a.topic, false)
}

// expectTopicListed checks whether the NameServer's topic list has topic.
func expectTopicListed(ctx context.Context, adm admin.Admin, topic string, want bool) error {
	list, err := adm.FetchAllTopicList(ctx)
	if err != nil {
		return fmt.Errorf("topic list: %w", err)
	}
	has := slices.Contains(list.TopicList, topic)
	logf("topic list: %d topics; %s listed: %v", len(list.TopicList), topic, has)
	if has != want {
		return fmt.Errorf("topic list %v: %s listed is %v, want %v", list.TopicList, topic, has, want)
	}
	return nil
}

// expectGroupListed starts a push consumer of group <prefix>-admin (its
// heartbeat creates the group) and finds the group, with RocketMQ's
// defaults, in the broker's subscription groups.
func expectGroupListed(ctx context.Context, adm admin.Admin, a caseArgs) error {
	group := a.prefix + "-admin"
	c, err := newPushConsumer(a, group, "admin-1", "*", newCollector(nil))
	if err != nil {
		return err
	}
	defer c.Shutdown()
	groups, err := adm.GetAllSubscriptionGroup(ctx, a.broker, 5*time.Second)
	if err != nil {
		return fmt.Errorf("subscription groups: %w", err)
	}
	g, ok := groups.SubscriptionGroupTable[group]
	logf("subscription groups: %d; %s: %+v", len(groups.SubscriptionGroupTable), group, g)
	if !ok {
		return fmt.Errorf("group %s not among the broker's subscription groups", group)
	}
	if g.GroupName != group || !g.ConsumeEnable || g.RetryMaxTimes != 16 || g.RetryQueueNums != 1 {
		return fmt.Errorf("group %s decoded as %+v; want its name, consumeEnable, retryMaxTimes 16, retryQueueNums 1", group, g)
	}
	return nil
}
