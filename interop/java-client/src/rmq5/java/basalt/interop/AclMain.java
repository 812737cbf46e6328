package basalt.interop;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * The official client's {@code AclClientRPCHook} against a Basalt broker
 * with ACL 2.0 on. Usage: {@code AclMain NAMESRV PHASE FLAGDIR} where the
 * test has created user alice (secret alice-secret-1) allowed to Pub on
 * TopicA only. Phase {@code before}: alice sends to TopicA (SEND_OK), is
 * refused (16) on TopicB and on a pull of TopicA (no Sub); a wrong secret
 * and no credentials are refused; then it writes FLAGDIR/granted-wait and
 * waits for FLAGDIR/granted (the test grants Pub on TopicB, Sub on TopicA
 * and the group), and the same client, without a restart, now sends to
 * TopicB and pulls; then it writes FLAGDIR/delete-wait, waits for
 * FLAGDIR/deleted (the test deleted alice) and its next send on the open
 * connection is refused. Prints {@code ACL PASSED} and exits 0, else
 * exits 1 with the reason.
 */
public final class AclMain {
    private static final String TOPIC_A = "TopicA";
    private static final String TOPIC_B = "TopicB";
    private static final String GROUP = "alice_group";
    private static final List<String> failures = new ArrayList<>();

    private AclMain() {}

    private static RPCHook hook(String ak, String sk) {
        return new AclClientRPCHook(new SessionCredentials(ak, sk));
    }

    private static DefaultMQProducer producer(String group, RPCHook hook, String ns) throws Exception {
        DefaultMQProducer p = hook == null ? new DefaultMQProducer(group) : new DefaultMQProducer(group, hook);
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(5_000);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        return p;
    }

    private static Message msg(String topic, String body) {
        return new Message(topic, body.getBytes(StandardCharsets.UTF_8));
    }

    private static void expectSent(DefaultMQProducer p, String topic, String what) {
        try {
            SendResult r = p.send(msg(topic, what));
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                failures.add(what + ": " + r.getSendStatus());
            } else {
                System.out.println("PASS " + what);
            }
        } catch (Exception e) {
            failures.add(what + ": " + e);
        }
    }

    /** The broker's refusal inside {@code e} (the producer wraps it), if any. */
    private static MQBrokerException brokerCause(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof MQBrokerException) {
                return (MQBrokerException) t;
            }
        }
        return null;
    }

    /** Expects a broker refusal with {@code code}. */
    private static void expectRefused(DefaultMQProducer p, String topic, int code, String what) {
        try {
            SendResult r = p.send(msg(topic, what));
            failures.add(what + ": was accepted (" + r.getSendStatus() + ")");
        } catch (Exception e) {
            MQBrokerException b = brokerCause(e);
            if (b == null || b.getResponseCode() != code) {
                failures.add(what + ": " + e);
            } else {
                System.out.println("PASS " + what + " refused: " + b.getResponseCode() + " " + b.getErrorMessage());
            }
        }
    }

    private static void pull(DefaultMQPullConsumer c, boolean allowed, String what) {
        try {
            Set<MessageQueue> mqs = c.fetchSubscribeMessageQueues(TOPIC_A);
            MessageQueue mq = mqs.iterator().next();
            c.pull(mq, "*", 0, 8);
            if (allowed) {
                System.out.println("PASS " + what);
            } else {
                failures.add(what + ": was allowed");
            }
        } catch (MQBrokerException e) {
            if (!allowed && e.getResponseCode() == 16) {
                System.out.println("PASS " + what + " refused: " + e.getErrorMessage());
            } else {
                failures.add(what + ": " + e.getResponseCode() + " " + e.getErrorMessage());
            }
        } catch (Exception e) {
            failures.add(what + ": " + e);
        }
    }

    private static void waitFor(Path flagDir, String wait, String go) throws Exception {
        Files.write(flagDir.resolve(wait), new byte[0]);
        long deadline = System.currentTimeMillis() + 60_000;
        while (!Files.exists(flagDir.resolve(go))) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("no " + go + " within 60 s");
            }
            Thread.sleep(50);
        }
    }

    @SuppressWarnings("deprecation")
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: AclMain NAMESRV FLAGDIR");
            System.exit(2);
        }
        String ns = args[0];
        Path flags = Paths.get(args[1]);
        RPCHook alice = hook("alice", "alice-secret-1");

        DefaultMQProducer p = producer("alice_producer", alice, ns);
        expectSent(p, TOPIC_A, "allowed-topic-A");
        expectRefused(p, TOPIC_B, 16, "denied-topic-B");
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(GROUP, alice);
        c.setNamesrvAddr(ns);
        c.start();
        pull(c, false, "pull-without-sub");

        DefaultMQProducer wrong = producer("wrong_producer", hook("alice", "not-the-secret"), ns);
        expectRefused(wrong, TOPIC_A, 16, "wrong-secret");
        wrong.shutdown();
        DefaultMQProducer none = producer("anon_producer", null, ns);
        expectRefused(none, TOPIC_A, 16, "no-credentials");
        none.shutdown();

        waitFor(flags, "granted-wait", "granted");
        expectSent(p, TOPIC_B, "topic-B-after-grant");
        pull(c, true, "pull-after-grant");

        waitFor(flags, "delete-wait", "deleted");
        expectRefused(p, TOPIC_A, 16, "deleted-user");
        c.shutdown();
        p.shutdown();

        if (failures.isEmpty()) {
            System.out.println("ACL PASSED");
            System.exit(0);
        }
        for (String f : failures) {
            System.out.println("FAIL " + f);
        }
        System.exit(1);
    }
}
