// Command gogrpcsdk runs self-checking cases of the RocketMQ 5 gRPC SDK for
// Go (github.com/apache/rocketmq-clients/golang/v5) against one Basalt
// broker's gRPC MessagingService:
//
//	gogrpcsdk -endpoint 127.0.0.1:8081 CASE...
//
// Each case owns topic go-CASE and consumer group gg-CASE (the test creates
// the topics). Every case prints what it sent (SENT) and received (RECV),
// counts exactly (COUNT) and fails unless each message arrived exactly once
// and, where the case says so, in order or at the right time. The last line
// is ALL PASSED, or FAILED naming the failed cases, with exit status 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// endpoint is the broker's gRPC address, host:port.
var endpoint string

// cases maps a case name to its function.
var cases = map[string]func() error{
	"normal":           caseNormal,
	"filter":           caseFilter,
	"shared":           caseShared,
	"any-queue":        caseAnyQueue,
	"bad-input":        caseBadInput,
	"fifo":             caseFifo,
	"orderly":          caseOrderly,
	"delay":            caseDelay,
	"transaction":      caseTransaction,
	"invisible":        caseInvisible,
	"change-invisible": caseChangeInvisible,
}

func main() {
	flag.StringVar(&endpoint, "endpoint", "127.0.0.1:8081", "the broker's gRPC host:port")
	useTLS := flag.Bool("tls", false, "dial with TLS (the SDK's own default) instead of plain text")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: gogrpcsdk -endpoint HOST:PORT [-tls] CASE...")
		os.Exit(2)
	}
	if !*useTLS {
		plainText()
	}
	// The SDK logs to a file under rocketmq.client.logRoot (the test points
	// it into its temporary directory); re-read the environment now.
	rmq.ResetLogger()
	var failed []string
	for _, name := range flag.Args() {
		run, ok := cases[name]
		if !ok {
			fmt.Printf("CASE %s FAILED: unknown case\n", name)
			failed = append(failed, name)
			continue
		}
		start := time.Now()
		if err := run(); err != nil {
			fmt.Printf("CASE %s FAILED: %v\n", name, err)
			failed = append(failed, name)
			continue
		}
		fmt.Printf("CASE %s PASSED in %d ms\n", name, time.Since(start).Milliseconds())
	}
	if len(failed) > 0 {
		fmt.Printf("FAILED: %v\n", failed)
		os.Exit(1)
	}
	fmt.Println("ALL PASSED")
}

// plainText makes every connection the SDK opens plain text (h2c). v5.1.2
// always dials with TLS: its connection options default to a TLS config
// and the client manager creates its RPC clients with no options, so the
// only hook is the exported NewRpcClient variable. A later transport
// credentials dial option replaces the TLS one.
func plainText() {
	tlsDialer := rmq.NewRpcClient
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		plain := rmq.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))
		opts = append(opts, rmq.WithRpcClientConnOption(plain))
		return tlsDialer(target, opts...)
	}
}

// config is the client configuration of every producer and consumer; the
// SDK requires credentials, which Basalt does not check (no ACL).
func config(group string) *rmq.Config {
	return &rmq.Config{
		Endpoint:      endpoint,
		ConsumerGroup: group,
		Credentials:   &credentials.SessionCredentials{},
	}
}

// producer starts a producer of topic (with a transaction checker when
// checker is not nil).
func producer(topic string, checker *rmq.TransactionChecker) (rmq.Producer, error) {
	opts := []rmq.ProducerOption{rmq.WithTopics(topic)}
	if checker != nil {
		opts = append(opts, rmq.WithTransactionChecker(checker))
	}
	p, err := rmq.NewProducer(config(""), opts...)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("start producer: %w", err)
	}
	return p, nil
}

// consumer starts a SimpleConsumer of group subscribed to every tag of
// topic, long polling 5 s per receive.
func consumer(group, topic string) (rmq.SimpleConsumer, error) {
	return consumerOf(group, topic, rmq.SUB_ALL)
}

// consumerOf starts a SimpleConsumer of group subscribed to topic with
// filter.
func consumerOf(group, topic string, filter *rmq.FilterExpression) (rmq.SimpleConsumer, error) {
	c, err := rmq.NewSimpleConsumer(config(group),
		rmq.WithAwaitDuration(5*time.Second),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: filter}),
	)
	if err != nil {
		return nil, fmt.Errorf("new simple consumer: %w", err)
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start simple consumer: %w", err)
	}
	return c, nil
}

// stop stops a producer or consumer, reporting (not failing on) an error.
func stop(what string, s interface{ GracefulStop() error }) {
	if err := s.GracefulStop(); err != nil {
		fmt.Printf("STOP %s: %v\n", what, err)
	}
}

// messageNotFound is the code of an empty receive (the SDK returns it as
// an error).
const messageNotFound = 40401

// isEmpty tells an empty receive from a failed one.
func isEmpty(err error) bool {
	var st *rmq.ErrRpcStatus
	return errors.As(err, &st) && st.Code == messageNotFound
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
