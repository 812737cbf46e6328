//! Push-consumer throughput against an in-process Basalt broker: fills a
//! topic with batch sends, then times one consumer reading all of it.
//!
//! `cargo run --release -p basalt-client --example consume_bench -- TOTAL BODY [QUEUES] [BATCH]`
//!
//! BATCH is `consume_message_batch_max_size` (messages per listener call).
//! Broker, NameServer and client share one 2-worker tokio runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, AsyncMessageListener, ClientConfig, ConsumeContext, ConsumeStatus, Message, MessageExt,
    Producer, PushConsumeFrom, PushConsumer, PushOptions, TopicConfig,
};
use basalt_remoting::transport::BoxFuture;
use tokio::sync::Notify;

const TOPIC: &str = "ConsumeBench";

struct Count {
    seen: AtomicU64,
    total: u64,
    done: Notify,
}

impl AsyncMessageListener for Count {
    fn consume<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut ConsumeContext,
    ) -> BoxFuture<'a, ConsumeStatus> {
        Box::pin(async move {
            let n = self.seen.fetch_add(msgs.len() as u64, Ordering::Relaxed) + msgs.len() as u64;
            if n >= self.total {
                self.done.notify_one();
            }
            ConsumeStatus::Success
        })
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numeric argument"))
        .collect();
    let total = args.first().copied().unwrap_or(300_000) as u64;
    let body = args.get(1).copied().unwrap_or(100);
    let queues = args.get(2).copied().unwrap_or(8) as i32;
    let batch = args.get(3).copied().unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let ns = basalt_namesrv::NameServer::start(basalt_namesrv::NamesrvConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            ..Default::default()
        })
        .await
        .expect("namesrv");
        let ns_addr = ns.local_addr().to_string();
        let dir = tempfile::tempdir().expect("tempdir");
        let broker = basalt_broker::start(basalt_broker::BrokerConfig {
            store_path_root_dir: dir.path().to_path_buf(),
            listen_addr: "127.0.0.1".parse().expect("ip"),
            broker_ip1: "127.0.0.1".parse().expect("ip"),
            listen_port: 0,
            namesrv_addr: Some(ns_addr.clone()),
            ..Default::default()
        })
        .await
        .expect("broker");
        let admin = Admin::new(ClientConfig::new(&ns_addr));
        let addr = broker.broker().broker_addr();
        loop {
            if admin.create_topic(&addr, &TopicConfig::new(TOPIC, queues)).await.is_ok()
                && admin.topic_route(TOPIC).await.is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        let producer = Producer::new("FillProducer", ClientConfig::new(&ns_addr));
        producer.start().await.expect("producer");
        let batch_msgs: Vec<Message> = (0..64).map(|_| Message::new(TOPIC, vec![b'x'; body])).collect();
        let mut filled = 0u64;
        while filled < total {
            producer.send_batch(&batch_msgs).await.expect("fill");
            filled += batch_msgs.len() as u64;
        }
        producer.shutdown().await;

        let listener = Arc::new(Count {
            seen: AtomicU64::new(0),
            total: filled,
            done: Notify::new(),
        });
        let consumer = PushConsumer::with_options(
            "BenchConsumer",
            ClientConfig::new(&ns_addr),
            PushOptions {
                consume_from_where: PushConsumeFrom::FirstOffset,
                consume_message_batch_max_size: batch,
                ..Default::default()
            },
        );
        consumer.subscribe(TOPIC, "*").expect("subscribe");
        struct Shared(Arc<Count>);
        impl AsyncMessageListener for Shared {
            fn consume<'a>(
                &'a self,
                msgs: &'a [MessageExt],
                ctx: &'a mut ConsumeContext,
            ) -> BoxFuture<'a, ConsumeStatus> {
                self.0.consume(msgs, ctx)
            }
        }
        consumer.register_async_listener(Shared(listener.clone()));
        let start = Instant::now();
        let done = listener.done.notified();
        consumer.start().await.expect("consumer");
        done.await;
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{filled} messages of {body} B over {queues} queues, {batch} per listener call: {secs:.2} s = {:.0} msg/s",
            filled as f64 / secs
        );
        consumer.shutdown().await;
        admin.shutdown();
        broker.shutdown().await;
        ns.shutdown().await;
    });
}
