//! A table-file writer whose pages stay in the page cache.
//!
//! `rocksdb::SstFileWriter` (RocksDB's C API) drops every MiB it writes from the page cache
//! (`fadvise(DONTNEED)`), so a bulk-loaded file moved into the database is on disk only and
//! the first statements after a load read it back (BENCHMARKS.md, session 63). Staging the
//! files on a tmpfs and having RocksDB copy them in kept the pages, at the price of the copy
//! (7% of a TPC-C load's server CPU, session 73). This writer is RocksDB's own, made by
//! `cpp/sst_writer.cc` with the invalidation off; it writes in the data directory and the
//! file is linked in, not copied.
#![allow(unsafe_code)] // a few calls into RocksDB's C API; each states what it relies on

use std::ffi::{c_char, CStr, CString};
use std::marker::PhantomData;
use std::path::Path;

use librocksdb_sys as ffi;
use rocksdb::{AsRawPtr, Options};

extern "C" {
    /// `cpp/sst_writer.cc`: an `SstFileWriter` for `options` that keeps its pages cached,
    /// in the C API's wrapper (freed by `rocksdb_sstfilewriter_destroy`).
    fn strata_sstfilewriter_create_cached(options: *const ffi::rocksdb_options_t) -> *mut ffi::rocksdb_sstfilewriter_t;
}

/// One table file being written: `open`, `put` in key order, `finish`.
pub(crate) struct CachedSstWriter<'a> {
    raw: *mut ffi::rocksdb_sstfilewriter_t,
    /// The writer copies what it needs of the options, but the C API's own wrapper asks
    /// them to outlive it; so do we.
    _options: PhantomData<&'a Options>,
}

impl<'a> CachedSstWriter<'a> {
    pub(crate) fn new(options: &'a Options) -> CachedSstWriter<'a> {
        // SAFETY: `options` is alive (borrowed for the writer's life); the function only
        // reads it and returns a new writer that `Drop` frees.
        let raw = unsafe { strata_sstfilewriter_create_cached(options.as_raw_ptr()) };
        CachedSstWriter { raw, _options: PhantomData }
    }

    pub(crate) fn open(&mut self, path: &Path) -> Result<(), String> {
        let path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: `raw` is a live writer and `path` a NUL-terminated string; errors come
        // back through `err` (see `checked`).
        checked(|err| unsafe { ffi::rocksdb_sstfilewriter_open(self.raw, path.as_ptr(), err) })
    }

    /// Adds `key` (greater than every key put before) with `value`.
    pub(crate) fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        // SAFETY: `raw` is a live writer; the slices are valid for their lengths and only
        // read during the call.
        checked(|err| unsafe {
            ffi::rocksdb_sstfilewriter_put(
                self.raw,
                key.as_ptr().cast::<c_char>(),
                key.len(),
                value.as_ptr().cast::<c_char>(),
                value.len(),
                err,
            )
        })
    }

    /// Completes the file and syncs it.
    pub(crate) fn finish(&mut self) -> Result<(), String> {
        // SAFETY: `raw` is a live, opened writer.
        checked(|err| unsafe { ffi::rocksdb_sstfilewriter_finish(self.raw, err) })
    }
}

impl Drop for CachedSstWriter<'_> {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `strata_sstfilewriter_create_cached` and is freed once.
        unsafe { ffi::rocksdb_sstfilewriter_destroy(self.raw) }
    }
}

/// Runs a C API call that reports failure by setting `*err` to a message it allocated.
fn checked(call: impl FnOnce(*mut *mut c_char)) -> Result<(), String> {
    let mut err: *mut c_char = std::ptr::null_mut();
    call(&mut err);
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null `err` is a NUL-terminated string from RocksDB's `strdup`, ours to
    // free with `rocksdb_free`.
    unsafe {
        let message = CStr::from_ptr(err).to_string_lossy().into_owned();
        ffi::rocksdb_free(err.cast());
        Err(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocksdb::{IngestExternalFileOptions, DB};

    #[test]
    fn a_written_file_is_ingested_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = Options::default();
        opts.create_if_missing(true);
        let db = DB::open(&opts, dir.path().join("db")).expect("open");
        let file = dir.path().join("t.sst");
        let mut w = CachedSstWriter::new(&opts);
        w.open(&file).expect("open file");
        for i in 0..1000u32 {
            w.put(format!("k{i:05}").as_bytes(), format!("v{i}").as_bytes()).expect("put");
        }
        w.finish().expect("finish");
        drop(w);
        let mut o = IngestExternalFileOptions::default();
        o.set_move_files(true);
        db.ingest_external_file_opts(&o, vec![file.as_path()]).expect("ingest");
        assert_eq!(db.get(b"k00000").expect("get"), Some(b"v0".to_vec()));
        assert_eq!(db.get(b"k00999").expect("get"), Some(b"v999".to_vec()));
        assert_eq!(db.get(b"k01000").expect("get"), None);
        assert!(!file.exists(), "the file was linked in and its staging name removed");
    }

    #[test]
    fn keys_out_of_order_are_refused_with_rocksdb_s_message() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options::default();
        let mut w = CachedSstWriter::new(&opts);
        w.open(&dir.path().join("t.sst")).expect("open file");
        w.put(b"b", b"1").expect("put");
        let e = w.put(b"a", b"2").expect_err("keys must ascend");
        assert!(e.contains("order"), "{e}");
    }

    #[test]
    fn a_file_in_a_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options::default();
        let mut w = CachedSstWriter::new(&opts);
        assert!(w.open(&dir.path().join("missing/t.sst")).is_err());
    }
}
