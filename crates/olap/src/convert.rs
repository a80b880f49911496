//! Values between Strata's rows and Arrow's columns.
//!
//! | MySQL type                  | Arrow type                 |
//! |-----------------------------|----------------------------|
//! | signed integers             | Int64                      |
//! | unsigned integers           | UInt64                     |
//! | DECIMAL(p, s), p <= 38      | Decimal128(p, s)           |
//! | FLOAT, DOUBLE               | Float64                    |
//! | CHAR, VARCHAR, TEXT         | Utf8                       |
//! | BINARY, VARBINARY, BLOB     | Binary                     |
//! | DATE                        | Date32                     |
//! | DATETIME, TIMESTAMP         | Timestamp(microsecond)     |
//!
//! TIME and DECIMAL wider than 38 digits have no mapping yet: a query that reads such a
//! column runs on the row engine. A value Arrow cannot hold (a zero date, a string that is
//! not UTF-8) makes the load fail with [`Skip`], and the row engine runs the query too.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BinaryBuilder, BooleanArray, Date32Array, Date32Builder, Decimal128Array,
    Decimal128Builder, Float32Array, Float64Array, Float64Builder, Int16Array, Int32Array, Int64Array, Int64Builder,
    Int8Array, LargeStringArray, StringArray, StringBuilder, StringViewArray, TimestampMicrosecondArray,
    TimestampMicrosecondBuilder, UInt16Array, UInt32Array, UInt64Array, UInt64Builder, UInt8Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::ScalarValue;
use rust_decimal::Decimal;
use strata_common::time::DateTime;
use strata_common::Value;
use strata_sql::types::ColumnType;

use crate::Skip;

/// Widest DECIMAL Arrow's Decimal128 holds.
pub const MAX_DECIMAL128: u8 = 38;

/// The Arrow type of a column type, or None when there is no mapping.
pub fn arrow_type(ty: &ColumnType) -> Option<DataType> {
    Some(match ty {
        ColumnType::Int { unsigned: false, .. } => DataType::Int64,
        ColumnType::Int { unsigned: true, .. } => DataType::UInt64,
        ColumnType::Decimal { precision, scale } if *precision <= MAX_DECIMAL128 => {
            DataType::Decimal128((*precision).max(1), *scale as i8)
        }
        ColumnType::Decimal { .. } => return None,
        ColumnType::Float | ColumnType::Double => DataType::Float64,
        ColumnType::Char(_) | ColumnType::Varchar(_) | ColumnType::Text(_) => DataType::Utf8,
        ColumnType::Blob(_) => DataType::Binary,
        ColumnType::Date => DataType::Date32,
        ColumnType::DateTime(_) | ColumnType::Timestamp(_) => DataType::Timestamp(TimeUnit::Microsecond, None),
        ColumnType::Time(_) => return None,
    })
}

fn epoch() -> DateTime {
    DateTime::from_ymd(1970, 1, 1)
}

/// Days since 1970-01-01 of a date (None for zero dates and dates with zero parts).
pub fn date_days(d: &DateTime) -> Option<i32> {
    if d.month == 0 || d.day == 0 {
        return None;
    }
    i32::try_from(d.day_number() - epoch().day_number()).ok()
}

/// Microseconds since 1970-01-01 00:00:00 of a datetime (None for zero dates).
pub fn datetime_micros(d: &DateTime) -> Option<i64> {
    if d.month == 0 || d.day == 0 {
        return None;
    }
    Some(d.to_micros() - epoch().to_micros())
}

/// The mantissa of `d` at `scale` digits (rounded half away from zero, as MySQL stores).
fn decimal_at(d: Decimal, scale: u8) -> i128 {
    let mut d = d.round_dp_with_strategy(scale as u32, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
    d.rescale(scale as u32);
    d.mantissa()
}

/// A literal as an Arrow scalar of the MySQL type `ty` (the value's own kind when None).
pub fn scalar(v: &Value, ty: Option<&ColumnType>) -> Result<ScalarValue, Skip> {
    let dt = ty.and_then(arrow_type);
    Ok(match (v, dt) {
        (Value::Null, Some(dt)) => ScalarValue::try_from(&dt).map_err(|e| Skip::new(e.to_string()))?,
        (Value::Null, None) => ScalarValue::Null,
        (v, Some(DataType::Decimal128(p, s))) => {
            let d = match v {
                Value::Int(i) => Decimal::from(*i),
                Value::UInt(u) => Decimal::from(*u),
                Value::Decimal(d) => *d,
                _ => return Err(Skip::new("non-numeric DECIMAL literal")),
            };
            ScalarValue::Decimal128(Some(decimal_at(d, s as u8)), p, s)
        }
        (Value::Int(i), Some(DataType::Float64)) => ScalarValue::Float64(Some(*i as f64)),
        (Value::Int(i), Some(DataType::UInt64)) if *i >= 0 => ScalarValue::UInt64(Some(*i as u64)),
        (Value::Int(i), _) => ScalarValue::Int64(Some(*i)),
        (Value::UInt(u), Some(DataType::Float64)) => ScalarValue::Float64(Some(*u as f64)),
        (Value::UInt(u), _) => ScalarValue::UInt64(Some(*u)),
        (Value::Double(f), _) => ScalarValue::Float64(Some(*f)),
        (Value::Decimal(d), _) => {
            let s = d.scale() as u8;
            let digits = d.mantissa().unsigned_abs().checked_ilog10().map(|l| l + 1).unwrap_or(1) as u8;
            ScalarValue::Decimal128(Some(d.mantissa()), digits.max(s).max(1), s as i8)
        }
        (Value::Bytes(b), Some(DataType::Binary)) => ScalarValue::Binary(Some(b.clone())),
        (Value::Bytes(b), _) => match std::str::from_utf8(b) {
            Ok(s) => ScalarValue::Utf8(Some(s.to_string())),
            Err(_) => ScalarValue::Binary(Some(b.clone())),
        },
        (Value::Date(d), _) => ScalarValue::Date32(Some(date_days(d).ok_or_else(|| Skip::new("zero date"))?)),
        (Value::DateTime(d), _) => {
            ScalarValue::TimestampMicrosecond(Some(datetime_micros(d).ok_or_else(|| Skip::new("zero datetime"))?), None)
        }
        (Value::Time(_), _) => return Err(Skip::new("TIME values")),
    })
}

/// Builds Arrow batches from rows, for some columns of a table.
pub struct BatchBuilder {
    /// Which row positions, in output order.
    columns: Vec<usize>,
    schema: SchemaRef,
    builders: Vec<ColumnBuilder>,
    len: usize,
}

enum ColumnBuilder {
    I64(Int64Builder),
    U64(UInt64Builder),
    Dec(Decimal128Builder, u8, u8),
    F64(Float64Builder),
    Str(StringBuilder),
    Bin(BinaryBuilder),
    Date(Date32Builder),
    Ts(TimestampMicrosecondBuilder),
}

impl BatchBuilder {
    /// A builder for row positions `columns` of a table whose column types are `types`.
    pub fn new(columns: Vec<usize>, types: &[ColumnType], names: &[String]) -> Result<BatchBuilder, Skip> {
        let mut fields = Vec::new();
        let mut builders = Vec::new();
        for &c in &columns {
            let ty = &types[c];
            let dt = arrow_type(ty).ok_or_else(|| Skip::new(format!("column type {}", ty.sql_name())))?;
            fields.push(Field::new(names[c].clone(), dt.clone(), true));
            builders.push(match dt {
                DataType::Int64 => ColumnBuilder::I64(Int64Builder::new()),
                DataType::UInt64 => ColumnBuilder::U64(UInt64Builder::new()),
                DataType::Decimal128(p, s) => ColumnBuilder::Dec(
                    Decimal128Builder::new().with_precision_and_scale(p, s).map_err(|e| Skip::new(e.to_string()))?,
                    p,
                    s as u8,
                ),
                DataType::Float64 => ColumnBuilder::F64(Float64Builder::new()),
                DataType::Utf8 => ColumnBuilder::Str(StringBuilder::new()),
                DataType::Binary => ColumnBuilder::Bin(BinaryBuilder::new()),
                DataType::Date32 => ColumnBuilder::Date(Date32Builder::new()),
                _ => ColumnBuilder::Ts(TimestampMicrosecondBuilder::new()),
            });
        }
        Ok(BatchBuilder { columns, schema: Arc::new(Schema::new(fields)), builders, len: 0 })
    }

    /// The schema of the batches built.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Rows appended since the last `finish`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends a table row.
    pub fn push(&mut self, row: &[Value]) -> Result<(), Skip> {
        for (b, &c) in self.builders.iter_mut().zip(&self.columns) {
            let v = &row[c];
            if v.is_null() {
                match b {
                    ColumnBuilder::I64(x) => x.append_null(),
                    ColumnBuilder::U64(x) => x.append_null(),
                    ColumnBuilder::Dec(x, ..) => x.append_null(),
                    ColumnBuilder::F64(x) => x.append_null(),
                    ColumnBuilder::Str(x) => x.append_null(),
                    ColumnBuilder::Bin(x) => x.append_null(),
                    ColumnBuilder::Date(x) => x.append_null(),
                    ColumnBuilder::Ts(x) => x.append_null(),
                }
                continue;
            }
            match (b, v) {
                (ColumnBuilder::I64(x), Value::Int(i)) => x.append_value(*i),
                (ColumnBuilder::U64(x), Value::UInt(u)) => x.append_value(*u),
                (ColumnBuilder::U64(x), Value::Int(i)) if *i >= 0 => x.append_value(*i as u64),
                (ColumnBuilder::Dec(x, _, s), Value::Decimal(d)) => x.append_value(decimal_at(*d, *s)),
                (ColumnBuilder::Dec(x, _, s), Value::Int(i)) => x.append_value(decimal_at(Decimal::from(*i), *s)),
                (ColumnBuilder::F64(x), Value::Double(f)) => x.append_value(*f),
                (ColumnBuilder::Str(x), Value::Bytes(bytes)) => {
                    x.append_value(std::str::from_utf8(bytes).map_err(|_| Skip::new("a string that is not UTF-8"))?)
                }
                (ColumnBuilder::Bin(x), Value::Bytes(bytes)) => x.append_value(bytes),
                (ColumnBuilder::Date(x), Value::Date(d) | Value::DateTime(d)) => {
                    x.append_value(date_days(d).ok_or_else(|| Skip::new("zero date"))?)
                }
                (ColumnBuilder::Ts(x), Value::DateTime(d) | Value::Date(d)) => {
                    x.append_value(datetime_micros(d).ok_or_else(|| Skip::new("zero datetime"))?)
                }
                (_, v) => return Err(Skip::new(format!("stored value {v:?} of an unexpected kind"))),
            }
        }
        self.len += 1;
        Ok(())
    }

    /// The rows appended so far as a batch; the builder starts over.
    pub fn finish(&mut self) -> Result<RecordBatch, Skip> {
        let arrays: Vec<ArrayRef> = self
            .builders
            .iter_mut()
            .map(|b| -> ArrayRef {
                match b {
                    ColumnBuilder::I64(x) => Arc::new(x.finish()),
                    ColumnBuilder::U64(x) => Arc::new(x.finish()),
                    ColumnBuilder::Dec(x, p, s) => Arc::new(
                        x.finish()
                            .with_precision_and_scale(*p, *s as i8)
                            .unwrap_or_else(|_| Decimal128Array::from(Vec::<Option<i128>>::new())),
                    ),
                    ColumnBuilder::F64(x) => Arc::new(x.finish()),
                    ColumnBuilder::Str(x) => Arc::new(x.finish()),
                    ColumnBuilder::Bin(x) => Arc::new(x.finish()),
                    ColumnBuilder::Date(x) => Arc::new(x.finish()),
                    ColumnBuilder::Ts(x) => Arc::new(x.finish()),
                }
            })
            .collect();
        // A scan that reads no column (COUNT(*)) still has its row count.
        let options = RecordBatchOptions::new().with_row_count(Some(self.len));
        self.len = 0;
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options).map_err(|e| Skip::new(e.to_string()))
    }
}

/// Appends the rows of `batch` to `out`, each value in the kind the row engine gives a
/// column of MySQL type `types[i]` (booleans as 0/1, integers as DECIMAL where MySQL says
/// DECIMAL, and so on).
pub fn append_rows(batch: &RecordBatch, types: &[Option<ColumnType>], out: &mut Vec<Vec<Value>>) -> Result<(), Skip> {
    let n = batch.num_rows();
    let start = out.len();
    out.extend((0..n).map(|_| Vec::with_capacity(batch.num_columns())));
    for (c, array) in batch.columns().iter().enumerate() {
        let ty = types.get(c).cloned().flatten();
        for (r, row) in out[start..].iter_mut().enumerate() {
            row.push(to_value(array.as_ref(), r, ty.as_ref())?);
        }
    }
    Ok(())
}

macro_rules! downcast {
    ($a:expr, $t:ty) => {
        $a.as_any().downcast_ref::<$t>().ok_or_else(|| Skip::new("array of an unexpected type"))?
    };
}

/// One value of an Arrow array as a Strata value of MySQL type `ty`.
fn to_value(a: &dyn Array, i: usize, ty: Option<&ColumnType>) -> Result<Value, Skip> {
    if a.is_null(i) {
        return Ok(Value::Null);
    }
    let v = match a.data_type() {
        DataType::Null => Value::Null,
        DataType::Boolean => Value::Int(downcast!(a, BooleanArray).value(i) as i64),
        DataType::Int8 => Value::Int(downcast!(a, Int8Array).value(i) as i64),
        DataType::Int16 => Value::Int(downcast!(a, Int16Array).value(i) as i64),
        DataType::Int32 => Value::Int(downcast!(a, Int32Array).value(i) as i64),
        DataType::Int64 => Value::Int(downcast!(a, Int64Array).value(i)),
        DataType::UInt8 => Value::UInt(downcast!(a, UInt8Array).value(i) as u64),
        DataType::UInt16 => Value::UInt(downcast!(a, UInt16Array).value(i) as u64),
        DataType::UInt32 => Value::UInt(downcast!(a, UInt32Array).value(i) as u64),
        DataType::UInt64 => Value::UInt(downcast!(a, UInt64Array).value(i)),
        DataType::Float32 => Value::Double(downcast!(a, Float32Array).value(i) as f64),
        DataType::Float64 => Value::Double(downcast!(a, Float64Array).value(i)),
        DataType::Decimal128(_, s) => {
            let m = downcast!(a, Decimal128Array).value(i);
            Value::Decimal(
                Decimal::try_from_i128_with_scale(m, *s as u32)
                    .map_err(|_| Skip::new("a DECIMAL wider than 28 digits"))?,
            )
        }
        DataType::Utf8 => Value::str(downcast!(a, StringArray).value(i)),
        DataType::LargeUtf8 => Value::str(downcast!(a, LargeStringArray).value(i)),
        DataType::Utf8View => Value::str(downcast!(a, StringViewArray).value(i)),
        DataType::Binary => Value::Bytes(downcast!(a, BinaryArray).value(i).to_vec()),
        DataType::Date32 => {
            let days = downcast!(a, Date32Array).value(i) as i64;
            Value::Date(epoch().with_day_number(epoch().day_number() + days))
        }
        DataType::Timestamp(TimeUnit::Microsecond, None) => {
            let us = downcast!(a, TimestampMicrosecondArray).value(i);
            Value::DateTime(DateTime::from_micros(epoch().to_micros() + us))
        }
        other => return Err(Skip::new(format!("result type {other}"))),
    };
    Ok(match ty {
        Some(t) => shape(v, t),
        None => v,
    })
}

/// A value in the kind the row engine uses for a column of type `ty`.
fn shape(v: Value, ty: &ColumnType) -> Value {
    match (ty, v) {
        (ColumnType::Decimal { scale, .. }, Value::Int(i)) => {
            let mut d = Decimal::from(i);
            d.rescale(*scale as u32);
            Value::Decimal(d)
        }
        (ColumnType::Decimal { scale, .. }, Value::UInt(u)) => {
            let mut d = Decimal::from(u);
            d.rescale(*scale as u32);
            Value::Decimal(d)
        }
        (ColumnType::Float | ColumnType::Double, Value::Int(i)) => Value::Double(i as f64),
        (ColumnType::Float | ColumnType::Double, Value::Decimal(d)) => {
            Value::Double(rust_decimal::prelude::ToPrimitive::to_f64(&d).unwrap_or(0.0))
        }
        (ColumnType::Int { unsigned: true, .. }, Value::Int(i)) if i >= 0 => Value::UInt(i as u64),
        (ColumnType::Int { unsigned: false, .. }, Value::UInt(u)) if u <= i64::MAX as u64 => Value::Int(u as i64),
        (ColumnType::Date, Value::DateTime(d)) => Value::Date(DateTime::from_ymd(d.year, d.month, d.day)),
        (_, v) => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Value {
        Value::Decimal(s.parse().expect("decimal"))
    }

    #[test]
    fn rows_survive_the_trip_through_arrow() {
        let types = vec![
            ColumnType::Int { bytes: 4, unsigned: false },
            ColumnType::Int { bytes: 8, unsigned: true },
            ColumnType::Decimal { precision: 10, scale: 2 },
            ColumnType::Double,
            ColumnType::Varchar(10),
            ColumnType::Blob(10),
            ColumnType::Date,
            ColumnType::DateTime(0),
        ];
        let names: Vec<String> = (0..types.len()).map(|i| format!("c{i}")).collect();
        let rows = vec![
            vec![
                Value::Int(-7),
                Value::UInt(u64::MAX),
                d("12.50"),
                Value::Double(0.25),
                Value::str("héllo"),
                Value::Bytes(vec![0, 255]),
                Value::Date(DateTime::from_ymd(1969, 12, 31)),
                Value::DateTime(DateTime { year: 2024, month: 2, day: 29, hour: 23, minute: 59, second: 58, micro: 7 }),
            ],
            vec![Value::Null; 8],
        ];
        let mut b = BatchBuilder::new((0..types.len()).collect(), &types, &names).expect("builder");
        for r in &rows {
            b.push(r).expect("push");
        }
        let batch = b.finish().expect("batch");
        assert_eq!(batch.num_rows(), 2);
        let mut out = Vec::new();
        append_rows(&batch, &types.iter().cloned().map(Some).collect::<Vec<_>>(), &mut out).expect("rows");
        assert_eq!(out, rows);
    }

    #[test]
    fn a_projection_keeps_the_row_count_and_values_arrow_cannot_hold_are_skips() {
        let types = vec![ColumnType::Date, ColumnType::Varchar(4), ColumnType::Time(0)];
        let names: Vec<String> = (0..3).map(|i| format!("c{i}")).collect();
        let mut b = BatchBuilder::new(vec![], &types, &names).expect("no columns");
        b.push(&[Value::Null, Value::Null, Value::Null]).expect("push");
        assert_eq!(b.finish().expect("batch").num_rows(), 1, "COUNT(*) needs the row count");
        let mut b = BatchBuilder::new(vec![0, 1], &types, &names).expect("builder");
        assert!(b.push(&[Value::Date(DateTime::from_ymd(0, 0, 0)), Value::Null, Value::Null]).is_err(), "zero date");
        assert!(b.push(&[Value::Null, Value::Bytes(vec![0xff]), Value::Null]).is_err(), "not UTF-8");
        assert!(BatchBuilder::new(vec![2], &types, &names).is_err(), "TIME has no mapping yet");
    }

    #[test]
    fn result_values_take_the_row_engines_kinds() {
        let dec = ColumnType::Decimal { precision: 20, scale: 2 };
        assert_eq!(shape(Value::Int(3), &dec), d("3.00"));
        assert_eq!(shape(Value::Int(1), &ColumnType::Double), Value::Double(1.0));
        assert_eq!(shape(Value::Int(5), &ColumnType::Int { bytes: 8, unsigned: true }), Value::UInt(5));
        // Literals as Arrow scalars: a decimal keeps its scale, rounded half away from zero.
        assert_eq!(
            scalar(&d("1.005"), Some(&ColumnType::Decimal { precision: 5, scale: 2 })).expect("scalar"),
            ScalarValue::Decimal128(Some(101), 5, 2)
        );
        assert_eq!(
            scalar(&d("-1.005"), Some(&ColumnType::Decimal { precision: 5, scale: 2 })).expect("scalar"),
            ScalarValue::Decimal128(Some(-101), 5, 2)
        );
        assert_eq!(
            scalar(&Value::Date(DateTime::from_ymd(1970, 1, 2)), None).expect("date"),
            ScalarValue::Date32(Some(1))
        );
        assert!(scalar(&Value::Time(5), None).is_err());
    }
}
