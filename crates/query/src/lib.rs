//! SQL over the history: each table of `bourse-history` (`order_events`, `orders`,
//! `trades`, `ledger`, `candles`, `settlements`: `Table::ALL`) registered by name over
//! its Parquet files, with the Hive partitions as columns (`date`, and `instrument` or,
//! for the ledger, `asset_partition`), so that `WHERE date = '2026-11-24'` reads only
//! that day's files.
//! Each query lists the files again, so it sees every commit made before it.
//!
//! It owns only the query engine (DataFusion) and the rendering of answers; it never
//! writes the history (the follower does) and never touches the exchange's state.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bourse_history::files::{tables_dir, FilesLock};
use bourse_history::Table;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::execution::cache::cache_manager::CacheManagerConfig;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};

/// How an answer is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A boxed text table.
    Table,
    /// CSV with a header line.
    Csv,
    /// A JSON array of objects (decimals as strings, timestamps as RFC 3339).
    Json,
}

impl Format {
    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "table" => Some(Format::Table),
            "csv" => Some(Format::Csv),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Table => "text/plain; charset=utf-8",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Json => "application/json",
        }
    }
}

/// Why a query has no answer: `code` is stable (`sql_error`, `plan_error`,
/// `execution_error`, `io`), `message` says what.
#[derive(Debug)]
pub struct QueryError {
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for QueryError {}

impl From<DataFusionError> for QueryError {
    fn from(error: DataFusionError) -> Self {
        let code = match error.find_root() {
            DataFusionError::SQL(..) => "sql_error",
            DataFusionError::Plan(_) | DataFusionError::SchemaError(..) => "plan_error",
            DataFusionError::IoError(_) | DataFusionError::ObjectStore(_) => "io",
            _ => "execution_error",
        };
        QueryError { code, message: error.strip_backtrace() }
    }
}

/// The history's tables, ready for SQL. Cheap to share: queries may run concurrently.
pub struct HistorySql {
    context: SessionContext,
    /// Tables registered empty (no files yet), registered over their files once some
    /// exist.
    empty: std::sync::Mutex<Vec<Table>>,
    /// Taken only by `drop` (which shuts it down without waiting, so that the owner may
    /// be dropped from async code, as a stopping server's state is).
    runtime: Option<tokio::runtime::Runtime>,
    history_dir: PathBuf,
    files_lock: FilesLock,
}

impl Drop for HistorySql {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl HistorySql {
    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("the runtime is taken only when the service is dropped")
    }

    /// Registers the tables under `history_dir` (those not written yet as empty
    /// tables). `threads`: how many cores a query may use.
    pub fn open(history_dir: &Path, threads: usize) -> Result<HistorySql, QueryError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("bourse-sql")
            .enable_all()
            .build()
            .map_err(|error| QueryError { code: "io", message: error.to_string() })?;
        let config = SessionConfig::new()
            .with_target_partitions(threads.max(1))
            .with_information_schema(true);
        // No cache of the tables' file listings: DataFusion keeps one forever by default,
        // and the history adds files at every commit and replaces them when it merges.
        let runtime_env = RuntimeEnvBuilder::new()
            .with_cache_manager(CacheManagerConfig::default().with_list_files_cache_limit(0))
            .build_arc()?;
        let context = SessionContext::new_with_config_rt(config, runtime_env);
        let sql = HistorySql {
            context,
            empty: std::sync::Mutex::new(Vec::new()),
            runtime: Some(runtime),
            history_dir: history_dir.to_path_buf(),
            files_lock: FilesLock::new(history_dir),
        };
        for table in Table::ALL {
            sql.register(table)?;
        }
        Ok(sql)
    }

    pub fn history_dir(&self) -> &Path {
        &self.history_dir
    }

    fn register(&self, table: Table) -> Result<(), QueryError> {
        let dir = tables_dir(&self.history_dir).join(table.name());
        let schema = table.schema();
        if !dir.exists() {
            let empty = MemTable::try_new(schema_with_partitions(table), vec![vec![]])?;
            self.context.register_table(table.name(), Arc::new(empty))?;
            self.empty.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(table);
            return Ok(());
        }
        let partitions = vec![
            ("date".to_string(), DataType::Utf8),
            (table.partition_column().to_string(), DataType::Utf8),
        ];
        let options =
            ParquetReadOptions::default().table_partition_cols(partitions).schema(&schema);
        let path = format!("{}/", dir.display());
        self.runtime().block_on(self.context.register_parquet(table.name(), path, options))?;
        Ok(())
    }

    /// Runs `query` and returns its answer's batches.
    pub fn query(&self, query: &str) -> Result<Vec<RecordBatch>, QueryError> {
        // Tables that were empty when opened are registered over their files once they
        // exist.
        let filled: Vec<Table> = {
            let mut empty = self.empty.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let filled = empty
                .iter()
                .copied()
                .filter(|table| tables_dir(&self.history_dir).join(table.name()).exists())
                .collect();
            empty.retain(|table| !tables_dir(&self.history_dir).join(table.name()).exists());
            filled
        };
        for table in filled {
            self.context.deregister_table(table.name())?;
            self.register(table)?;
        }
        // The files stay put while the query lists and reads them: a merge of small
        // files (`bourse_history::compact`) waits for it.
        let _files = self.files_lock.shared().map_err(|error| QueryError {
            code: "io",
            message: format!("locking the history's files: {error}"),
        })?;
        self.runtime()
            .block_on(async {
                let frame = self.context.sql(query).await?;
                frame.collect().await
            })
            .map_err(QueryError::from)
    }

    /// Runs `query` and renders its answer.
    pub fn query_rendered(&self, query: &str, format: Format) -> Result<String, QueryError> {
        let batches = self.query(query)?;
        render(&batches, format)
    }
}

fn schema_with_partitions(table: Table) -> Arc<datafusion::arrow::datatypes::Schema> {
    use datafusion::arrow::datatypes::{Field, Schema};
    let mut fields: Vec<Field> =
        table.schema().fields().iter().map(|field| field.as_ref().clone()).collect();
    fields.push(Field::new("date", DataType::Utf8, false));
    fields.push(Field::new(table.partition_column(), DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// An exact decimal as text without trailing zeros: `12.5`, `-0.001`, `3`.
pub fn decimal_text(value: i128, scale: i8) -> String {
    if scale <= 0 {
        return (value * 10i128.pow(u32::from(scale.unsigned_abs()))).to_string();
    }
    let unit = 10u128.pow(scale as u32);
    let magnitude = value.unsigned_abs();
    let (whole, fraction) = (magnitude / unit, magnitude % unit);
    let mut text = if value < 0 { format!("-{whole}") } else { whole.to_string() };
    if fraction != 0 {
        let digits = format!("{fraction:0width$}", width = scale as usize);
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    text
}

/// The batch with every decimal column as exact text without trailing zeros, so that
/// JSON carries them as strings (a JSON number would be read as a double) and tables
/// and CSV are not padded with 18 zeros.
fn decimals_as_text(
    batch: &RecordBatch,
) -> Result<RecordBatch, datafusion::arrow::error::ArrowError> {
    use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
    use datafusion::arrow::datatypes::{Decimal128Type, Field, Schema};
    let schema = batch.schema();
    if !schema.fields().iter().any(|field| matches!(field.data_type(), DataType::Decimal128(..))) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match field.data_type() {
            DataType::Decimal128(_, scale) => {
                let decimals = column.as_primitive::<Decimal128Type>();
                let mut text = StringBuilder::with_capacity(decimals.len(), decimals.len() * 8);
                for row in 0..decimals.len() {
                    if decimals.is_null(row) {
                        text.append_null();
                    } else {
                        text.append_value(decimal_text(decimals.value(row), *scale));
                    }
                }
                fields.push(Field::new(field.name(), DataType::Utf8, field.is_nullable()));
                columns.push(Arc::new(text.finish()));
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(Arc::clone(column));
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// Renders batches as `format`; decimals exactly, as text (strings in JSON).
pub fn render(batches: &[RecordBatch], format: Format) -> Result<String, QueryError> {
    let arrow = |error: datafusion::arrow::error::ArrowError| QueryError {
        code: "execution_error",
        message: error.to_string(),
    };
    let batches: Vec<RecordBatch> =
        batches.iter().map(decimals_as_text).collect::<Result<_, _>>().map_err(arrow)?;
    let batches = batches.as_slice();
    match format {
        Format::Table => Ok(pretty_format_batches(batches).map_err(arrow)?.to_string()),
        Format::Csv => {
            let mut bytes = Vec::new();
            {
                let mut writer = datafusion::arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(&mut bytes);
                for batch in batches {
                    writer.write(batch).map_err(arrow)?;
                }
            }
            String::from_utf8(bytes)
                .map_err(|error| QueryError { code: "execution_error", message: error.to_string() })
        }
        Format::Json => {
            let mut bytes = Vec::new();
            {
                let mut writer = datafusion::arrow::json::ArrayWriter::new(&mut bytes);
                let refs: Vec<&RecordBatch> = batches.iter().collect();
                writer.write_batches(&refs).map_err(arrow)?;
                writer.finish().map_err(arrow)?;
            }
            let mut text = String::from_utf8(bytes).map_err(|error| QueryError {
                code: "execution_error",
                message: error.to_string(),
            })?;
            if text.is_empty() {
                text.push_str("[]");
            }
            let _ = writeln!(text);
            Ok(text)
        }
    }
}
