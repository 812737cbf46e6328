package basalt.interop;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.AckStatus;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.consumer.PopStatus;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.constant.ConsumeInitMode;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.header.AckMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ChangeInvisibleTimeRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;

/**
 * POP consumption through the 5.x client's own POP calls (MQClientAPIImpl
 * popMessageAsync / ackMessageAsync / changeInvisibleTimeAsync), which
 * decode the broker's answer and build each message's POP_CK as the 5.x
 * POP push consumer does: every message popped once and acked; a message
 * left unacked comes back with its reconsume count raised; a change of
 * invisible time is answered and its new handle acks.
 */
final class PopCase {
    private PopCase() {}

    static final long TIMEOUT_MS = 10_000;

    static void run(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        List<String> keys = ProducerCases.keys(ctx, 10);
        String topic = ConsumerCases.topicWith(ctx, p, keys);
        String group = ctx.group("pop");
        MQClientAPIImpl api = p.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
        String brokerName = p.fetchPublishMessageQueues(topic).get(0).getBrokerName();
        String addr = p.getDefaultMQProducerImpl().getMqClientFactory().findBrokerAddressInPublish(brokerName);

        // Every message popped exactly once, then acked.
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (seen.size() < keys.size() && System.currentTimeMillis() < deadline) {
            for (MessageExt m : pop(api, brokerName, addr, topic, group, 60_000)) {
                ctx.check(m.getProperty(MessageConst.PROPERTY_POP_CK) != null, "POP_CK on %s", m.getKeys());
                ctx.check(seen.add(m.getKeys()), "popped twice: %s", m.getKeys());
                ctx.check(m.getReconsumeTimes() == 0, "first delivery of %s", m.getKeys());
                ack(ctx, api, addr, topic, group, m);
            }
        }
        ctx.check(seen.equals(new HashSet<>(keys)), "popped %s of %s", seen.size(), keys.size());
        ctx.log("popped and acked %d", seen.size());

        // A message left unacked reappears with its reconsume count raised.
        List<String> one = ProducerCases.keys(ctx, 1);
        ConsumerCases.send(ctx, p, ProducerCases.msg(topic, "T", one.get(0)));
        MessageExt first = popOne(ctx, api, brokerName, addr, topic, group, 2_000);
        ctx.check(first.getKeys().equals(one.get(0)), "first delivery %s", first.getKeys());
        MessageExt again = popOne(ctx, api, brokerName, addr, topic, group, 2_000);
        ctx.check(again.getKeys().equals(one.get(0)), "redelivery %s", again.getKeys());
        ctx.check(again.getReconsumeTimes() == 1, "reconsume times %d", again.getReconsumeTimes());
        ctx.log("redelivered %s with reconsume times 1", again.getKeys());

        // Changing the invisible time answers the new pop time; its handle acks.
        String ck = again.getProperty(MessageConst.PROPERTY_POP_CK);
        String[] info = ExtraInfoUtil.split(ck);
        ChangeInvisibleTimeRequestHeader ch = new ChangeInvisibleTimeRequestHeader();
        ch.setConsumerGroup(group);
        // As the POP push consumer does: the topic the message was read from.
        ch.setTopic(ExtraInfoUtil.getRealTopic(info, topic, group));
        ch.setQueueId(ExtraInfoUtil.getQueueId(info));
        ch.setExtraInfo(ck);
        ch.setOffset(ExtraInfoUtil.getQueueOffset(info));
        ch.setInvisibleTime(30_000L);
        CompletableFuture<AckResult> changed = new CompletableFuture<>();
        api.changeInvisibleTimeAsync(brokerName, addr, ch, TIMEOUT_MS, callback(changed));
        AckResult cr = changed.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        ctx.check(cr.getStatus() == AckStatus.OK, "change invisible time: %s", cr);
        ctx.check(cr.getExtraInfo() != null, "a new handle");
        again.getProperties().put(MessageConst.PROPERTY_POP_CK, cr.getExtraInfo());
        ack(ctx, api, addr, topic, group, again);
        List<MessageExt> after = pop(api, brokerName, addr, topic, group, 60_000);
        ctx.check(after.isEmpty(), "nothing left after the acks: %d", after.size());
    }

    static List<MessageExt> pop(MQClientAPIImpl api, String brokerName, String addr, String topic,
        String group, long invisibleMs) throws Exception {
        PopMessageRequestHeader h = new PopMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(-1);
        h.setMaxMsgNums(32);
        h.setInvisibleTime(invisibleMs);
        h.setPollTime(3_000);
        h.setBornTime(System.currentTimeMillis());
        h.setInitMode(ConsumeInitMode.MIN);
        h.setExpType("TAG");
        h.setExp("*");
        CompletableFuture<PopResult> f = new CompletableFuture<>();
        api.popMessageAsync(brokerName, addr, h, TIMEOUT_MS, new PopCallback() {
            @Override
            public void onSuccess(PopResult r) {
                f.complete(r);
            }

            @Override
            public void onException(Throwable e) {
                f.completeExceptionally(e);
            }
        });
        PopResult r = f.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        if (r.getPopStatus() != PopStatus.FOUND || r.getMsgFoundList() == null) {
            return new ArrayList<>();
        }
        return r.getMsgFoundList();
    }

    static MessageExt popOne(Ctx ctx, MQClientAPIImpl api, String brokerName, String addr, String topic,
        String group, long invisibleMs) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            List<MessageExt> got = pop(api, brokerName, addr, topic, group, invisibleMs);
            if (!got.isEmpty()) {
                ctx.check(got.size() == 1, "one message, got %d", got.size());
                return got.get(0);
            }
        }
        throw new CaseFailed("no message popped within 30 s");
    }

    static void ack(Ctx ctx, MQClientAPIImpl api, String addr, String topic, String group, MessageExt m)
        throws Exception {
        String ck = m.getProperty(MessageConst.PROPERTY_POP_CK);
        String[] info = ExtraInfoUtil.split(ck);
        AckMessageRequestHeader h = new AckMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(ExtraInfoUtil.getRealTopic(info, topic, group));
        h.setQueueId(ExtraInfoUtil.getQueueId(info));
        h.setExtraInfo(ck);
        h.setOffset(ExtraInfoUtil.getQueueOffset(info));
        CompletableFuture<AckResult> f = new CompletableFuture<>();
        api.ackMessageAsync(addr, TIMEOUT_MS, callback(f), h);
        AckResult r = f.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        ctx.check(r.getStatus() == AckStatus.OK, "ack %s: %s", m.getKeys(), r);
    }

    static AckCallback callback(CompletableFuture<AckResult> f) {
        return new AckCallback() {
            @Override
            public void onSuccess(AckResult r) {
                f.complete(r);
            }

            @Override
            public void onException(Throwable e) {
                f.completeExceptionally(e);
            }
        };
    }
}
