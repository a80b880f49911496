// Compaction outputs of the latest column family cut where a table's rows end and each
// of its indexes begins and ends.
//
// RocksDB places an ingested table file in the lowest level where no file's key *range*
// overlaps it. Compactions write files that run across the key space (a flushed memtable
// holds every table's keys), so a bulk load's file of new rows, which holds no key any
// other file holds, still found a level-6 file whose range spanned it and landed in level
// 0. Cut at these boundaries, a file holds one table's rows or one index's entries, and a
// load that appends to a table's rows lands below all of them (TiKV's compaction guard
// cuts its files at region boundaries for the same reason).
//
// A latest-CF key is the group-encoded user key (8 bytes, then a marker byte): `t`, the
// table id (8 bytes), `_r` or `_i` and for an index its id (8 bytes). Encoded, the table
// and kind are the first 12 bytes, an index's id ends at byte 21. Any other key (the
// catalog's `m` keys) is one unit.
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/sst_partitioner.h>
#include <rocksdb/utilities/object_registry.h>

#include <algorithm>
#include <memory>
#include <mutex>

namespace {

using rocksdb::PartitionerRequest;
using rocksdb::PartitionerResult;
using rocksdb::Slice;

constexpr size_t kTableKindLen = 12;
constexpr size_t kIndexLen = 21;

// The leading bytes of `key` that name its unit: a table's rows, one index, or the rest.
Slice Unit(const Slice& key) {
  const char* d = key.data();
  if (key.size() >= kTableKindLen && d[0] == 't' &&
      static_cast<unsigned char>(d[8]) == 0xFF) {
    if (d[11] == 'i' && key.size() >= kIndexLen) {
      return Slice(d, kIndexLen);
    }
    return Slice(d, kTableKindLen);
  }
  return Slice(d, std::min<size_t>(key.size(), 1));
}

class TablePartitioner : public rocksdb::SstPartitioner {
 public:
  const char* Name() const override { return "StrataTablePartitioner"; }

  PartitionerResult ShouldPartition(const PartitionerRequest& r) override {
    return Unit(*r.prev_user_key) == Unit(*r.current_user_key)
               ? rocksdb::kNotRequired
               : rocksdb::kRequired;
  }

  bool CanDoTrivialMove(const Slice& smallest, const Slice& largest) override {
    return Unit(smallest) == Unit(largest);
  }
};

class TablePartitionerFactory : public rocksdb::SstPartitionerFactory {
 public:
  static const char* kClassName() { return "StrataTablePartitionerFactory"; }
  const char* Name() const override { return kClassName(); }

  std::unique_ptr<rocksdb::SstPartitioner> CreatePartitioner(
      const rocksdb::SstPartitioner::Context&) const override {
    return std::make_unique<TablePartitioner>();
  }
};

}  // namespace

// The C API's wrapper (db/c.cc).
struct rocksdb_options_t {
  rocksdb::Options rep;
};

// Sets the partitioner on `options`. The factory is registered by name first, once, so
// RocksDB can read back the OPTIONS file it writes.
extern "C" void strata_options_set_table_partitioner(rocksdb_options_t* options) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    rocksdb::ObjectLibrary::Default()->AddFactory<rocksdb::SstPartitionerFactory>(
        TablePartitionerFactory::kClassName(),
        [](const std::string&, std::unique_ptr<rocksdb::SstPartitionerFactory>* guard,
           std::string*) {
          guard->reset(new TablePartitionerFactory());
          return guard->get();
        });
  });
  options->rep.sst_partitioner_factory = std::make_shared<TablePartitionerFactory>();
}

// How many leading bytes of `key` name its unit, for the bulk-load path to cut its files
// where compactions cut theirs.
extern "C" size_t strata_table_unit_len(const char* key, size_t len) {
  return Unit(Slice(key, len)).size();
}
