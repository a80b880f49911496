//! Compiles `cpp/sst_writer.cc` (a table-file writer that keeps its pages cached) and
//! `cpp/table_partitioner.cc` (compaction outputs cut at table boundaries), which RocksDB's
//! C API cannot make, against the RocksDB sources librocksdb-sys builds.

fn main() {
    println!("cargo:rerun-if-changed=cpp/sst_writer.cc");
    println!("cargo:rerun-if-changed=cpp/table_partitioner.cc");
    // librocksdb-sys (`links = "rocksdb"`) exports its manifest directory; the RocksDB
    // sources, headers included, are under it.
    let rocksdb = std::env::var("DEP_ROCKSDB_CARGO_MANIFEST_DIR")
        .expect("librocksdb-sys exports its directory (cargo:cargo_manifest_dir)");
    cc::Build::new()
        .cpp(true)
        .std("c++20")
        .include(format!("{rocksdb}/rocksdb/include"))
        .file("cpp/sst_writer.cc")
        .file("cpp/table_partitioner.cc")
        .warnings(false)
        .compile("strata_sst_writer");
}
