//! Compiles Basalt's MessagingService .proto files with a pure-Rust protobuf
//! compiler (protox) and writes the prost messages and the tonic server
//! into the output directory given as the only argument.

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(proto_root), Some(out)) = (args.next(), args.next()) else {
        eprintln!("usage: basalt-gen-grpc PROTO_ROOT OUT_DIR");
        std::process::exit(2);
    };
    let files = [
        format!("{proto_root}/apache/rocketmq/v2/definition.proto"),
        format!("{proto_root}/apache/rocketmq/v2/service.proto"),
    ];
    let fds = match protox::compile(&files, [&proto_root]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("proto: {e:?}");
            std::process::exit(1);
        }
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .out_dir(&out)
        .compile_fds(fds)
    {
        eprintln!("generate: {e}");
        std::process::exit(1);
    }
}
