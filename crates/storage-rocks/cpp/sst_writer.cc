// A table-file writer that keeps what it writes in the page cache.
//
// RocksDB's C API creates every SstFileWriter with `invalidate_page_cache = true`: each
// MiB written is dropped from the page cache with fadvise(DONTNEED), so a bulk-loaded file
// moved into the database must be read back from the disk by the first statements that
// touch it. This one function builds the writer with that flag off and hands it back in
// the C API's wrapper, so the C API's open / put / finish / destroy work on it unchanged.
// Everything else is as rocksdb_sstfilewriter_create makes it (default EnvOptions).
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>

// The C API's wrappers (db/c.cc): one member each, the C++ object or a pointer to it.
struct rocksdb_options_t {
  rocksdb::Options rep;
};
struct rocksdb_sstfilewriter_t {
  rocksdb::SstFileWriter* rep;
};

extern "C" rocksdb_sstfilewriter_t* strata_sstfilewriter_create_cached(
    const rocksdb_options_t* options) {
  auto* writer = new rocksdb_sstfilewriter_t;
  writer->rep = new rocksdb::SstFileWriter(rocksdb::EnvOptions(), options->rep,
                                           /*column_family=*/nullptr,
                                           /*invalidate_page_cache=*/false);
  return writer;
}
