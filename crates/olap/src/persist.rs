//! Stable parts on disk: one Arrow IPC file per replica, `t{table id}.arrow` in the
//! replicas' directory, so a restart loads a replica and catches up from the versions
//! committed since instead of rebuilding it from a scan of every row.
//!
//! The file holds the stable part's batches with the handles as an extra first column
//! (`_handle`), and in its footer the snapshot timestamp, the column positions and the table
//! definition it was built for (JSON). A file is written beside the old one and renamed over
//! it after an fsync, so a crash leaves the old file or the new one, never half of one; a
//! file that does not read back is removed and the replica is rebuilt.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{make_array, Array, ArrayRef, BinaryArray, MutableArrayData, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::FileWriter;
use strata_common::{Error, Result, Timestamp};
use strata_sql::catalog::TableInfo;

use crate::replica::Stable;

const HANDLE: &str = "_handle";
const KEY_TS: &str = "strata.ts";
const KEY_COLUMNS: &str = "strata.columns";
const KEY_TABLE: &str = "strata.table";

/// What a file's footer says: the snapshot it holds and the definition it was built for.
pub struct Header {
    /// The stable part's timestamp.
    pub ts: Timestamp,
    /// The table definition it was built for.
    pub info: TableInfo,
}

fn io(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::internal(format!("columnar replica file {}: {what}: {e}", path.display()))
}

/// The file of table `table_id`'s replica in `dir`.
pub fn path(dir: &Path, table_id: i64) -> PathBuf {
    dir.join(format!("t{table_id}.arrow"))
}

/// The table ids that have a file in `dir`.
pub fn list(dir: &Path) -> Vec<i64> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix('t')?.strip_suffix(".arrow")?.parse().ok()
        })
        .collect()
}

/// Removes table `table_id`'s file, if any.
pub fn remove(dir: &Path, table_id: i64) {
    let p = path(dir, table_id);
    match std::fs::remove_file(&p) {
        Ok(()) => tracing::info!("columnar replica file {} removed", p.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("cannot remove columnar replica file {}: {e}", p.display()),
    }
}

/// Writes `stable`, built for `info`, as table `info.id`'s file; returns its size in bytes.
pub fn save(dir: &Path, info: &TableInfo, stable: &Stable) -> Result<u64> {
    let target = path(dir, info.id);
    std::fs::create_dir_all(dir).map_err(|e| io("create directory", dir, e))?;
    let tmp = target.with_extension("arrow.tmp");
    let table = serde_json::to_string(info).map_err(|e| io("encode definition", &target, e))?;
    let columns = stable.columns.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    let batch_schema = stable.schema();
    let mut fields = vec![Arc::new(Field::new(HANDLE, DataType::Binary, false))];
    fields.extend(batch_schema.fields().iter().cloned());
    let schema = Arc::new(Schema::new(fields));
    let file = File::create(&tmp).map_err(|e| io("create", &tmp, e))?;
    let mut w = FileWriter::try_new(BufWriter::new(file), &schema).map_err(|e| io("write", &tmp, e))?;
    w.write_metadata(KEY_TS, stable.ts.0.to_string());
    w.write_metadata(KEY_COLUMNS, columns);
    w.write_metadata(KEY_TABLE, table);
    for (keys, batch) in stable.parts() {
        let mut arrays: Vec<ArrayRef> = vec![Arc::new(keys.clone())];
        arrays.extend(batch.columns().iter().cloned());
        let b = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| io("write", &tmp, e))?;
        w.write(&b).map_err(|e| io("write", &tmp, e))?;
    }
    let mut buf = w.into_inner().map_err(|e| io("write", &tmp, e))?;
    buf.flush().map_err(|e| io("write", &tmp, e))?;
    let file = buf.into_inner().map_err(|e| io("write", &tmp, e.error()))?;
    file.sync_all().map_err(|e| io("sync", &tmp, e))?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    drop(file);
    std::fs::rename(&tmp, &target).map_err(|e| io("rename", &tmp, e))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io("sync directory", dir, e))?;
    Ok(bytes)
}

fn header_of(p: &Path, meta: &HashMap<String, String>) -> Result<(Header, Vec<usize>)> {
    let get = |k: &str| meta.get(k).ok_or_else(|| io("footer", p, format!("no {k}")));
    let ts = get(KEY_TS)?.parse::<u64>().map_err(|e| io("footer", p, e))?;
    let info: TableInfo = serde_json::from_str(get(KEY_TABLE)?).map_err(|e| io("footer", p, e))?;
    let columns = get(KEY_COLUMNS)?;
    let columns = if columns.is_empty() {
        Vec::new()
    } else {
        columns
            .split(',')
            .map(|c| c.parse::<usize>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| io("footer", p, e))?
    };
    Ok((Header { ts: Timestamp(ts), info }, columns))
}

fn open(dir: &Path, table_id: i64) -> Result<Option<(PathBuf, FileReader<BufReader<File>>)>> {
    let p = path(dir, table_id);
    let file = match File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("open", &p, e)),
    };
    let reader = FileReader::try_new(BufReader::new(file), None).map_err(|e| io("read", &p, e))?;
    Ok(Some((p, reader)))
}

/// The footer of table `table_id`'s file, without reading its batches.
pub fn header(dir: &Path, table_id: i64) -> Result<Option<Header>> {
    let Some((p, reader)) = open(dir, table_id)? else { return Ok(None) };
    Ok(Some(header_of(&p, reader.custom_metadata())?.0))
}

/// A copy of `a` in buffers of its own. The IPC reader slices every array of a batch out of
/// one buffer holding the whole message, so each would report (and keep alive) all of it:
/// memory accounting would count a batch once per column, and a projection would pin the
/// columns it dropped.
fn own(a: &ArrayRef) -> std::result::Result<ArrayRef, datafusion::arrow::error::ArrowError> {
    let data = a.to_data();
    let mut copy = MutableArrayData::new(vec![&data], false, a.len());
    copy.try_extend(0, 0, a.len())?;
    Ok(make_array(copy.freeze()))
}

/// Reads table `table_id`'s file back: the definition it was built for and its stable part.
pub fn load(dir: &Path, table_id: i64) -> Result<Option<(TableInfo, Stable)>> {
    let Some((p, reader)) = open(dir, table_id)? else { return Ok(None) };
    let (header, columns) = header_of(&p, reader.custom_metadata())?;
    let file_schema = reader.schema();
    if file_schema.fields().first().map(|f| f.name().as_str()) != Some(HANDLE) {
        return Err(io("read", &p, "the first column is not the handles"));
    }
    let schema = Arc::new(Schema::new(file_schema.fields().iter().skip(1).cloned().collect::<Vec<_>>()));
    let (mut keys, mut batches) = (Vec::new(), Vec::new());
    for b in reader {
        let b = b.map_err(|e| io("read", &p, e))?;
        let k = own(b.column(0))
            .map_err(|e| io("read", &p, e))?
            .as_any()
            .downcast_ref::<BinaryArray>()
            .cloned()
            .ok_or_else(|| io("read", &p, "handles are not binary"))?;
        if k.null_count() > 0 || k.is_empty() {
            return Err(io("read", &p, "a batch without handles"));
        }
        let columns = b.columns()[1..]
            .iter()
            .map(own)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| io("read", &p, e))?;
        let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| io("read", &p, e))?;
        keys.push(k);
        batches.push(batch);
    }
    let stable = Stable::from_parts(header.ts, columns, schema, keys, batches).map_err(|e| io("read", &p, e))?;
    Ok(Some((header.info, stable)))
}
