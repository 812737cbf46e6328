package basalt.interop;

import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageRequestMode;

/**
 * The 5.x client's POP push consumer: the group's mode is set to POP
 * (SET_MESSAGE_REQUEST_MODE, as `mqadmin setConsumeMode` does), the
 * consumer lets the broker assign its queues (setClientRebalance(false):
 * QUERY_ASSIGNMENT) and then pops them: every message is consumed exactly
 * once, each carrying its POP_CK (popped, not pulled).
 */
final class PopPushCase {
    private PopPushCase() {}

    static void run(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        List<String> keys = ProducerCases.keys(ctx, 20);
        String topic = ConsumerCases.topicWith(ctx, p, keys);
        String group = ctx.group("popc");
        MQClientAPIImpl api = p.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
        String brokerName = p.fetchPublishMessageQueues(topic).get(0).getBrokerName();
        String addr = p.getDefaultMQProducerImpl().getMqClientFactory().findBrokerAddressInPublish(brokerName);
        api.setMessageRequestMode(addr, topic, group, MessageRequestMode.POP, -1, 10_000);
        ctx.log("set %s / %s to POP at %s", topic, group, addr);

        DefaultMQPushConsumer c = ctx.pushConsumer("popc");
        c.setClientRebalance(false);
        c.subscribe(topic, "*");
        Collector col = Collector.concurrent(ctx, "popc", c).start();
        col.expectExactly(keys, 60);
        for (Collector.Delivery d : col.deliveries()) {
            ctx.check(d.msg().getProperty(MessageConst.PROPERTY_POP_CK) != null,
                "%s was not popped (no POP_CK)", d.key());
        }
        ctx.log("all %d popped through the broker's assignment", keys.size());
    }
}
