//! One small SQL interface over the two databases the index can live in: SQLite (a file, the
//! embedded default) and PostgreSQL (shared by many daemons). The store writes its statements once,
//! with `?N` placeholders and SQL both accept; for PostgreSQL the placeholders become `$N` and
//! values are converted to whatever type the server asks for. Rows come back as plain values.

use std::cell::RefCell;

/// A value going in or coming out.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0}")]
    Pg(#[from] postgres::Error),
    #[error("the query returned no rows")]
    NoRows,
    #[error("column {0}: {1}")]
    Decode(usize, String),
    #[error("{0}")]
    Lost(&'static str),
}

pub type Result<T> = std::result::Result<T, Error>;

/// A value of a Rust type as a parameter.
pub trait ToVal {
    fn to_val(&self) -> Val;
}

impl<T: ToVal + ?Sized> ToVal for &T {
    fn to_val(&self) -> Val {
        (**self).to_val()
    }
}
impl ToVal for str {
    fn to_val(&self) -> Val {
        Val::Text(self.to_string())
    }
}
impl ToVal for String {
    fn to_val(&self) -> Val {
        Val::Text(self.clone())
    }
}
macro_rules! int_to_val {
    ($($t:ty),*) => {$(
        impl ToVal for $t {
            fn to_val(&self) -> Val {
                Val::Int(*self as i64)
            }
        }
    )*};
}
int_to_val!(i64, i32, u32, u64, usize);
impl ToVal for f64 {
    fn to_val(&self) -> Val {
        Val::Real(*self)
    }
}
impl ToVal for bool {
    fn to_val(&self) -> Val {
        Val::Int(*self as i64)
    }
}
impl<T: ToVal> ToVal for Option<T> {
    fn to_val(&self) -> Val {
        self.as_ref().map_or(Val::Null, ToVal::to_val)
    }
}

/// Parameters as the store writes them: `params![a, b]`, or an array of one type.
pub trait Params {
    fn vals(self) -> Vec<Val>;
}
impl Params for Vec<Val> {
    fn vals(self) -> Vec<Val> {
        self
    }
}
impl<T: ToVal, const N: usize> Params for [T; N] {
    fn vals(self) -> Vec<Val> {
        self.iter().map(ToVal::to_val).collect()
    }
}

/// `?from, ?from+1, …` for `n` parameters: the list of an `IN (…)` whose length varies.
pub fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

macro_rules! params {
    () => { Vec::<$crate::sql::Val>::new() };
    ($($x:expr),+ $(,)?) => {
        vec![$($crate::sql::ToVal::to_val(&$x)),+]
    };
}
pub(crate) use params;

/// A row's values.
#[derive(Debug)]
pub struct Row(Vec<Val>);

/// A column index (an integer literal is an `i32`).
pub trait Idx {
    fn idx(self) -> usize;
}
impl Idx for usize {
    fn idx(self) -> usize {
        self
    }
}
impl Idx for i32 {
    fn idx(self) -> usize {
        self as usize
    }
}

/// A Rust type a column's value can be read as.
pub trait FromVal: Sized {
    fn from_val(v: &Val) -> std::result::Result<Self, String>;
}
impl FromVal for i64 {
    fn from_val(v: &Val) -> std::result::Result<Self, String> {
        match v {
            Val::Int(i) => Ok(*i),
            Val::Real(f) => Ok(*f as i64),
            Val::Text(t) => t.parse().map_err(|_| format!("{t:?} is no integer")),
            Val::Null => Err("NULL where an integer was expected".into()),
        }
    }
}
impl FromVal for f64 {
    fn from_val(v: &Val) -> std::result::Result<Self, String> {
        match v {
            Val::Int(i) => Ok(*i as f64),
            Val::Real(f) => Ok(*f),
            Val::Text(t) => t.parse().map_err(|_| format!("{t:?} is no number")),
            Val::Null => Err("NULL where a number was expected".into()),
        }
    }
}
impl FromVal for String {
    fn from_val(v: &Val) -> std::result::Result<Self, String> {
        match v {
            Val::Text(t) => Ok(t.clone()),
            Val::Int(i) => Ok(i.to_string()),
            Val::Real(f) => Ok(f.to_string()),
            Val::Null => Err("NULL where text was expected".into()),
        }
    }
}
impl FromVal for bool {
    fn from_val(v: &Val) -> std::result::Result<Self, String> {
        i64::from_val(v).map(|i| i != 0)
    }
}
impl<T: FromVal> FromVal for Option<T> {
    fn from_val(v: &Val) -> std::result::Result<Self, String> {
        match v {
            Val::Null => Ok(None),
            v => T::from_val(v).map(Some),
        }
    }
}

impl Row {
    pub fn get<I: Idx, T: FromVal>(&self, i: I) -> Result<T> {
        let i = i.idx();
        let v = self.0.get(i).unwrap_or(&Val::Null);
        T::from_val(v).map_err(|e| Error::Decode(i, e))
    }
}

/// `query_row(…).optional()`: no row is `None`.
pub trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}
impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(t) => Ok(Some(t)),
            Err(Error::NoRows) => Ok(None),
            Err(Error::Sqlite(rusqlite::Error::QueryReturnedNoRows)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A connection to either database.
pub enum Db {
    Sqlite(rusqlite::Connection),
    Pg(Box<RefCell<PgClient>>),
}

/// The synchronous PostgreSQL client, closed off any tokio runtime when dropped (closing blocks,
/// and a runtime's thread must not).
///
/// A connection the server closed (it restarted, an administrator ended it, the network broke) is
/// opened again before the next statement: the statement that met the closed connection fails
/// (its caller retries as for any database error), the ones after it work again.
pub struct PgClient {
    client: Option<postgres::Client>,
    config: postgres::Config,
    /// Statements prepared on this connection, by their SQL: one round trip per statement
    /// instead of two (prepare, then execute). Emptied when the connection is opened again.
    prepared: std::collections::HashMap<String, postgres::Statement>,
    /// A transaction is open: a connection lost now loses it, and a new one must not carry on
    /// with its remaining statements as if nothing happened.
    in_tx: bool,
}

impl PgClient {
    pub fn new(c: postgres::Client, config: postgres::Config) -> PgClient {
        PgClient {
            client: Some(c),
            config,
            prepared: std::collections::HashMap::new(),
            in_tx: false,
        }
    }

    /// Connect with `config`, off any tokio runtime.
    pub fn open(
        config: &postgres::Config,
    ) -> std::result::Result<postgres::Client, postgres::Error> {
        off_runtime(|| config.connect(postgres::NoTls))
    }

    fn get(&mut self) -> Result<&mut postgres::Client> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            if self.in_tx {
                return Err(Error::Lost(
                    "the connection to PostgreSQL was lost in the middle of a transaction",
                ));
            }
            let fresh = PgClient::open(&self.config)?;
            self.prepared.clear();
            if let Some(old) = self.client.replace(fresh) {
                off_runtime(move || drop(old));
            }
        }
        Ok(self.client.as_mut().expect("just opened"))
    }

    /// The connection and `sql` prepared on it (once per connection).
    fn prepared(&mut self, sql: &str) -> Result<(&mut postgres::Client, postgres::Statement)> {
        self.get()?;
        let client = self.client.as_mut().expect("connected");
        let stmt = match self.prepared.get(sql) {
            Some(s) => s.clone(),
            None => {
                let s = off_runtime(|| client.prepare(sql))?;
                // Statements are few and mostly fixed; a runaway set starts over.
                if self.prepared.len() >= 512 {
                    self.prepared.clear();
                }
                self.prepared.insert(sql.to_string(), s.clone());
                s
            }
        };
        Ok((client, stmt))
    }
}

impl Drop for PgClient {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                std::thread::spawn(move || drop(c));
            }
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_pg() {
            "Db(PostgreSQL)"
        } else {
            "Db(SQLite)"
        })
    }
}

/// `?N` placeholders as PostgreSQL writes them: `$N`.
fn pg_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c == '?' && !quoted && chars.peek().is_some_and(|n| n.is_ascii_digit()) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

fn sqlite_val(v: &Val) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Val::Null => V::Null,
        Val::Int(i) => V::Integer(*i),
        Val::Real(f) => V::Real(*f),
        Val::Text(t) => V::Text(t.clone()),
    }
}

fn sqlite_row(r: &rusqlite::Row, n: usize) -> rusqlite::Result<Row> {
    use rusqlite::types::ValueRef as V;
    let mut vals = Vec::with_capacity(n);
    for i in 0..n {
        vals.push(match r.get_ref(i)? {
            V::Null => Val::Null,
            V::Integer(i) => Val::Int(i),
            V::Real(f) => Val::Real(f),
            V::Text(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
            V::Blob(b) => Val::Text(String::from_utf8_lossy(b).into_owned()),
        });
    }
    Ok(Row(vals))
}

fn pg_row(r: &postgres::Row) -> Result<Row> {
    use postgres::types::Type;
    let mut vals = Vec::with_capacity(r.len());
    for (i, c) in r.columns().iter().enumerate() {
        let t = c.type_();
        let v = if *t == Type::INT8 {
            r.try_get::<_, Option<i64>>(i)?.map(Val::Int)
        } else if *t == Type::INT4 {
            r.try_get::<_, Option<i32>>(i)?.map(|x| Val::Int(x as i64))
        } else if *t == Type::INT2 {
            r.try_get::<_, Option<i16>>(i)?.map(|x| Val::Int(x as i64))
        } else if *t == Type::FLOAT8 {
            r.try_get::<_, Option<f64>>(i)?.map(Val::Real)
        } else if *t == Type::FLOAT4 {
            r.try_get::<_, Option<f32>>(i)?.map(|x| Val::Real(x as f64))
        } else if *t == Type::BOOL {
            r.try_get::<_, Option<bool>>(i)?.map(|x| Val::Int(x as i64))
        } else {
            r.try_get::<_, Option<String>>(i)?.map(Val::Text)
        };
        vals.push(v.unwrap_or(Val::Null));
    }
    Ok(Row(vals))
}

impl postgres::types::ToSql for Val {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>>
    {
        use postgres::types::Type;
        match self {
            Val::Null => Ok(postgres::types::IsNull::Yes),
            Val::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => (*i as i32).to_sql(ty, out),
                Type::INT2 => (*i as i16).to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                _ => i.to_string().to_sql(ty, out),
            },
            Val::Real(f) => match *ty {
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                Type::FLOAT8 => f.to_sql(ty, out),
                _ => f.to_string().to_sql(ty, out),
            },
            Val::Text(t) => match *ty {
                Type::INT8 => t.parse::<i64>()?.to_sql(ty, out),
                Type::INT4 => t.parse::<i32>()?.to_sql(ty, out),
                _ => t.as_str().to_sql(ty, out),
            },
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// Run `f` where the synchronous PostgreSQL client may block: it drives its own runtime, which
/// cannot start on a thread that runs a tokio runtime (the daemon's scheduler), so there `f` runs
/// on a short-lived thread of its own.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(f).join().expect("a PostgreSQL call panicked"))
    } else {
        f()
    }
}

fn pg_params(vals: &[Val]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    vals.iter()
        .map(|v| v as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

impl Db {
    pub fn is_pg(&self) -> bool {
        matches!(self, Db::Pg(_))
    }

    pub fn execute(&self, sql: &str, p: impl Params) -> Result<usize> {
        let vals = p.vals();
        match self {
            Db::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let params: Vec<rusqlite::types::Value> = vals.iter().map(sqlite_val).collect();
                Ok(stmt.execute(rusqlite::params_from_iter(params))?)
            }
            Db::Pg(c) => {
                let mut c = c.borrow_mut();
                let (client, stmt) = c.prepared(&pg_sql(sql))?;
                Ok(off_runtime(|| client.execute(&stmt, &pg_params(&vals)))? as usize)
            }
        }
    }

    pub fn query(&self, sql: &str, p: impl Params) -> Result<Vec<Row>> {
        let vals = p.vals();
        match self {
            Db::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let n = stmt.column_count();
                let params: Vec<rusqlite::types::Value> = vals.iter().map(sqlite_val).collect();
                let rows = stmt
                    .query_map(rusqlite::params_from_iter(params), |r| sqlite_row(r, n))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(rows)
            }
            Db::Pg(c) => {
                let mut c = c.borrow_mut();
                let (client, stmt) = c.prepared(&pg_sql(sql))?;
                off_runtime(|| client.query(&stmt, &pg_params(&vals)))?
                    .iter()
                    .map(pg_row)
                    .collect()
            }
        }
    }

    pub fn query_row<T>(
        &self,
        sql: &str,
        p: impl Params,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        let rows = self.query(sql, p)?;
        match rows.first() {
            Some(r) => f(r),
            None => Err(Error::NoRows),
        }
    }

    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match self {
            Db::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Db::Pg(c) => {
                let mut client = c.borrow_mut();
                let client = client.get()?;
                Ok(off_runtime(|| client.batch_execute(sql))?)
            }
        }
    }

    /// A statement to run several times (cached by SQLite).
    pub fn prepare_cached(&self, sql: &str) -> Result<Stmt<'_>> {
        Ok(Stmt {
            db: self,
            sql: sql.to_string(),
        })
    }

    /// A transaction: committed by `commit`, rolled back when dropped without. On SQLite it
    /// takes the write lock at once (`BEGIN IMMEDIATE`): a transaction that reads before it
    /// writes would otherwise fail, not wait, when another connection wrote in between.
    pub fn transaction(&self) -> Result<Tx<'_>> {
        self.execute_batch(if self.is_pg() {
            "BEGIN"
        } else {
            "BEGIN IMMEDIATE"
        })?;
        self.set_in_tx(true);
        Ok(Tx {
            db: self,
            done: false,
        })
    }
}

impl Db {
    fn set_in_tx(&self, open: bool) {
        if let Db::Pg(c) = self {
            c.borrow_mut().in_tx = open;
        }
    }
}

/// A statement of [`Db::prepare_cached`].
pub struct Stmt<'a> {
    db: &'a Db,
    sql: String,
}

impl Stmt<'_> {
    pub fn execute(&mut self, p: impl Params) -> Result<usize> {
        self.db.execute(&self.sql, p)
    }

    pub fn query_map<T>(
        &mut self,
        p: impl Params,
        f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let rows = self.db.query(&self.sql, p)?;
        Ok(rows.iter().map(f).collect::<Vec<_>>().into_iter())
    }

    pub fn query_row<T>(&mut self, p: impl Params, f: impl FnOnce(&Row) -> Result<T>) -> Result<T> {
        self.db.query_row(&self.sql, p, f)
    }

    pub fn exists(&mut self, p: impl Params) -> Result<bool> {
        Ok(!self.db.query(&self.sql, p)?.is_empty())
    }
}

/// A transaction of [`Db::transaction`].
pub struct Tx<'a> {
    db: &'a Db,
    done: bool,
}

impl std::ops::Deref for Tx<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.db
    }
}

impl Tx<'_> {
    pub fn commit(mut self) -> Result<()> {
        self.done = true;
        let r = self.db.execute_batch("COMMIT");
        self.db.set_in_tx(false);
        r
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.db.execute_batch("ROLLBACK");
            self.db.set_in_tx(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pg_sql;

    #[test]
    fn placeholders_become_dollars_outside_strings() {
        assert_eq!(
            pg_sql("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d > ?10"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d > $10"
        );
    }
}
