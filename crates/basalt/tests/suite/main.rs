//! Basalt's process tests: real `basalt` processes on 127.0.0.1, driven by
//! raw frames, the RocketMQ Rust client, the C++ client and the `basalt`
//! tools.
//!
//! They are one test binary, not one per file: each file used to be its own
//! binary, compiling and linking the shared helpers and the client
//! libraries' generics again, which cost CI minutes. nextest still runs
//! every test in its own process. A file's tests are named after it:
//! `cargo nextest run -p basalt -E 'test(/^ledger_faults::/)'`, or
//! `cargo test -p basalt --test suite ledger_faults::`.

#![recursion_limit = "256"]

// Helpers shared by the tests.
mod cpp_client;
mod interop;
mod procs;
mod prom;
mod raw;
mod rmq_client;
mod standalone;
mod tls_certs;

mod admin_ops;
mod admin_verbs;
mod auth;
mod auth_cpp_client;
mod auth_java;
mod auth_mqadmin;
mod auth_namesrv;
mod auth_replication;
mod bad_input;
mod compat_cpp_client;
mod compat_rocketmq_client_rust;
mod dashboard;
mod dashboard_auth;
mod disk_full;
mod disk_timers;
mod grpc_go_sdk;
mod grpc_java_sdk;
mod grpc_java_sdk_consumers;
mod grpc_node_sdk;
mod grpc_ops;
mod grpc_python_sdk;
mod grpc_rust_sdk;
mod ha_failover;
mod hostile_client;
mod idle_connections;
mod interop_go_client;
mod interop_java_client;
mod interop_mqadmin;
mod interop_store_migration;
mod ledger_failover;
mod ledger_faults;
mod ledger_ops;
mod many_topics;
mod metrics;
mod pop;
mod pop_java;
mod pop_ledger;
mod registration_split;
mod replication_auth;
mod replication_tls;
mod resubscribe;
mod sql92_rocketmq_client_rust;
mod store_repair;
mod timers;
mod tls;
mod tool_output;
mod transactions;
