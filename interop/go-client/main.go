// Command goclient drives the official RocketMQ Go client
// (github.com/apache/rocketmq-client-go/v2, a pure-Go remoting client)
// against a broker, one self-checking case per sub-command. Each case
// prints what it sent and what it received, counts exactly (every message
// once; in order where order is promised) and exits non-zero with the
// reason on any mismatch. Basalt's suite runs it from
// crates/basalt/tests/suite/interop_go_client.rs.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// Options common to every case.
type caseArgs struct {
	namesrv string
	broker  string
	topic   string
	group   string
	prefix  string
	n       int
	wait    time.Duration
}

// A case: its name, what it checks, and how it runs.
type caseFn struct {
	about string
	run   func(caseArgs) error
}

var cases = map[string]caseFn{
	"modes":       {"sync, async, oneway and batch sends; two clustering consumers share a group; a TagA || TagB consumer", runModes},
	"orderly":     {"hash-selector sends by sharding key; an orderly consumer sees each key's messages in order", runOrderly},
	"pull":        {"sync sends read back by a pull consumer (Poll/ACK)", runPull},
	"delay":       {"a delay-level message arrives once, not before its level's delay", runDelay},
	"admin":       {"the admin API creates, lists and deletes a topic and lists subscription groups", runAdmin},
	"transaction": {"half messages committed, rolled back, and decided by check-back; the consumer sees exactly the committed", runTransaction},
	"retry":       {"a consumer fails each message once; each comes back once from the retry topic", runRetry},
	"produce":     {"sync sends of -n messages keyed <prefix>-<i>", runProduce},
	"consume":     {"a push consumer of -group receives exactly <prefix>-0..n-1 and nothing else", runConsume},
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: goclient CASE -namesrv HOST:PORT -topic T [-broker HOST:PORT] [-group G] [-prefix P] [-n N] [-wait D]\ncases:\n")
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", name, cases[name].about)
	}
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	c, ok := cases[os.Args[1]]
	if !ok {
		usage()
	}
	var a caseArgs
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	fs.StringVar(&a.namesrv, "namesrv", "", "NameServer address")
	fs.StringVar(&a.broker, "broker", "", "broker address (admin)")
	fs.StringVar(&a.topic, "topic", "", "topic")
	fs.StringVar(&a.group, "group", "", "consumer group (consume)")
	fs.StringVar(&a.prefix, "prefix", "m", "key prefix of the messages")
	fs.IntVar(&a.n, "n", 20, "messages per send mode / key")
	fs.DurationVar(&a.wait, "wait", 60*time.Second, "how long to wait for messages")
	_ = fs.Parse(os.Args[2:])
	if a.namesrv == "" || a.topic == "" {
		usage()
	}
	// The client logs every rebalance and heartbeat at info to stdout.
	rlog.SetLogLevel("warn")
	started := time.Now()
	if err := c.run(a); err != nil {
		fmt.Printf("FAIL %s after %.1f s: %v\n", os.Args[1], time.Since(started).Seconds(), err)
		os.Exit(1)
	}
	fmt.Printf("PASS %s after %.1f s\n", os.Args[1], time.Since(started).Seconds())
	// The client's goroutines (heartbeats, rebalances) may still run; a
	// process exit ends them.
	os.Exit(0)
}

// logf prints one timestamped line of what the case did.
func logf(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// summarize shortens a long list of keys for printing.
func summarize(keys []string) string {
	if len(keys) <= 12 {
		return strings.Join(keys, " ")
	}
	return fmt.Sprintf("%s ... %s (%d)", strings.Join(keys[:6], " "), strings.Join(keys[len(keys)-6:], " "), len(keys))
}
