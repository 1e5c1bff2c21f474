//! Generates the CSI bindings from `proto/csi.proto`, and kubelet's plugin-registration
//! bindings from `proto/pluginregistration.proto`, with a pure-Rust protobuf compiler
//! (`protox`), so no system `protoc` is needed.

use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/csi.proto");

    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler
        .include_source_info(true)
        .include_imports(true)
        .open_file("csi.proto")?;

    // Exported for reflection and tests. Encoded by protox itself so the custom options
    // (`csi_secret`, `alpha_*`) survive; prost-types would drop them as unknown fields.
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(
        out_dir.join("csi_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Every RPC a plugin does not implement answers Unimplemented, as the spec asks.
        .generate_default_stubs(true)
        .compile_fds(compiler.file_descriptor_set())?;

    println!("cargo:rerun-if-changed=proto/pluginregistration.proto");
    let registration = protox::compile(["pluginregistration.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(registration)?;
    Ok(())
}
