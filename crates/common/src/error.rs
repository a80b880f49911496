//! The one error type of Strata. Every variant maps to a stable MySQL error number and
//! SQLSTATE, so a client sees the same codes MySQL or TiDB would give it.
//!
//! Categories: invalid input (`User` with a specific `Code`), conflicts that a client may
//! retry (`WriteConflict`, `LockWaitTimeout`, `Deadlock`), a lock a reader must resolve
//! (`KeyLocked`, never shown to clients unless resolution fails), I/O, and internal bugs.

use crate::ids::Timestamp;

/// Result with Strata's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! codes {
    ($($name:ident = $num:expr, $state:expr;)*) => {
        /// A MySQL error number with its SQLSTATE.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Code { $(#[allow(missing_docs)] $name,)* }
        impl Code {
            /// The MySQL error number.
            pub fn number(self) -> u16 { match self { $(Code::$name => $num,)* } }
            /// The five-character SQLSTATE.
            pub fn sqlstate(self) -> &'static str { match self { $(Code::$name => $state,)* } }
        }
    };
}

codes! {
    DbCreateExists = 1007, "HY000";
    DbDropExists = 1008, "HY000";
    TooManyConnections = 1040, "08004";
    AccessDenied = 1045, "28000";
    DbAccessDenied = 1044, "42000";
    TableAccessDenied = 1142, "42000";
    SpecificAccessDenied = 1227, "42000";
    CannotUser = 1396, "HY000";
    PasswordNoMatch = 1133, "42000";
    NonexistingGrant = 1141, "42000";
    CantCreateUserWithGrant = 1410, "42000";
    KillDenied = 1095, "HY000";
    ClientInteractionTimeout = 4031, "HY000";
    SecureTransportRequired = 3159, "HY000";
    TableNotLockedForWrite = 1099, "HY000";
    TableNotLockedForUse = 1100, "HY000";
    CantUpdateWithReadLock = 1223, "HY000";
    UnsupportedIsolationLevel = 8048, "HY000";
    NoDb = 1046, "3D000";
    UnknownCom = 1047, "08S01";
    BadNull = 1048, "23000";
    BadDb = 1049, "42000";
    TableExists = 1050, "42S01";
    BadTable = 1051, "42S02";
    NonUniq = 1052, "23000";
    BadField = 1054, "42S22";
    NoSuchTable = 1146, "42S02";
    KeyColumnDoesNotExist = 1072, "42000";
    TooManyKeyParts = 1070, "42000";
    WrongFieldWithGroup = 1055, "42000";
    DupFieldName = 1060, "42S21";
    DupKeyName = 1061, "42000";
    DupEntry = 1062, "23000";
    Parse = 1064, "42000";
    NonUniqTable = 1066, "42000";
    InvalidDefault = 1067, "42000";
    MultiplePriKey = 1068, "42000";
    WrongAutoKey = 1075, "42000";
    CantDropFieldOrKey = 1091, "42000";
    TooBigPrecision = 1426, "42000";
    TableDefChanged = 1412, "HY000";
    StackOverrun = 1436, "HY000";
    AutoIncReadFailed = 1467, "HY000";
    MaxPreparedStmtCountReached = 1461, "42000";
    UnknownError = 1105, "HY000";
    InvalidGroupFuncUse = 1111, "HY000";
    UnknownCharset = 1115, "42000";
    WrongValueCount = 1136, "21S01";
    NetPacketTooLarge = 1153, "08S01";
    NetErrorOnWrite = 1160, "08S01";
    NetWriteInterrupted = 1161, "08S01";
    KeyDoesNotExist = 1176, "42000";
    LockWaitTimeout = 1205, "HY000";
    WrongArguments = 1210, "HY000";
    RegexpIndexOutOfBounds = 3686, "HY000";
    RegexpRuleSyntax = 3688, "HY000";
    RegexpPatternTooBig = 3700, "HY000";
    Deadlock = 1213, "40001";
    WrongValueForVar = 1231, "42000";
    WrongTypeForVar = 1232, "42000";
    NotSupported = 1235, "42000";
    OperandColumns = 1241, "21000";
    SubqueryNo1Row = 1242, "21000";
    UnknownStmtHandler = 1243, "HY000";
    UnknownSystemVariable = 1193, "HY000";
    DataOutOfRange = 1264, "22003";
    TruncatedWrongValue = 1292, "22007";
    InvalidCharacterString = 1300, "HY000";
    WarnAllowedPacketOverflowed = 1301, "HY000";
    CutValueGroupConcat = 1260, "HY000";
    QueryInterrupted = 1317, "70100";
    NoSuchThread = 1094, "HY000";
    ConnectionKilled = 1927, "70100";
    QueryTimeout = 3024, "HY000";
    NoDefaultForField = 1364, "HY000";
    DivisionByZero = 1365, "22012";
    TruncatedWrongValueForField = 1366, "HY000";
    DataTooLong = 1406, "22001";
    InvalidUseOfNull = 1138, "22004";
    CheckConstraintViolated = 3819, "HY000";
    FileNotFound = 29, "HY000";
    UnknownCharacterSet = 1115, "42000";
    IncorrectGlobalLocalVar = 1238, "HY000";
    LocalVariable = 1228, "HY000";
    GlobalVariable = 1229, "HY000";
    WrongFieldTerminators = 1083, "42000";
    WarnTooFewRecords = 1261, "01000";
    WarnTooManyRecords = 1262, "01000";
    WarnNullToNotNull = 1263, "22004";
    OptionPreventsStatement = 1290, "HY000";
    ClientLocalFilesDisabled = 3948, "42000";
    CheckConstraintDupName = 3822, "HY000";
    CheckConstraintColumn = 3959, "HY000";
    NonDefaultValueForGeneratedColumn = 3105, "HY000";
    DependentByGeneratedColumn = 3108, "HY000";
    WrongParamcountToNativeFct = 1582, "42000";
    MalformedPacket = 1835, "HY000";
    WrongColumnName = 1166, "42000";
    WrongDbName = 1102, "42000";
    WrongTableName = 1103, "42000";
    TooLongIdent = 1059, "42000";
    UnknownTable = 1109, "42S02";
    FieldSpecifiedTwice = 1110, "42000";
    TableMustHaveColumns = 1113, "42000";
    WrongKeyColumn = 1167, "42000";
    BlobKeyWithoutLength = 1170, "42000";
    PrimaryCantHaveNull = 1171, "42000";
    CantDoThisDuringTxn = 1179, "25000";
    UpdateTableUsed = 1093, "HY000";
    WrongUsage = 1221, "HY000";
    NonUpdatableTable = 1288, "HY000";
    WrongObject = 1347, "HY000";
    ViewWrongList = 1353, "HY000";
    ViewInvalid = 1356, "HY000";
    ViewRecursive = 1462, "HY000";
    CteMaxRecursionDepth = 3636, "HY000";
    FieldInGroupingNotGroupBy = 3602, "HY000";
    WindowNoSuchWindow = 3579, "HY000";
    WindowCircularity = 3580, "HY000";
    WindowNoChildPartitioning = 3581, "HY000";
    WindowNoInheritFrame = 3582, "HY000";
    WindowNoRedefineOrderBy = 3583, "HY000";
    WindowFrameStartIllegal = 3584, "HY000";
    WindowFrameEndIllegal = 3585, "HY000";
    WindowFrameIllegal = 3586, "HY000";
    WindowDuplicateName = 3591, "HY000";
    WindowInvalidUse = 3593, "HY000";
    CteRecursiveRequiresUnion = 3573, "HY000";
    WrongNumberOfColumnsInSelect = 1222, "21000";
    IllegalReference = 1247, "42S22";
    UnknownTimeZone = 1298, "HY000";
    FunctionNotExists = 1305, "42000";
    DataOutOfRangeBigint = 1690, "22003";
    WriteConflict = 9007, "HY000";
    InfoSchemaChanged = 8028, "HY000";
    OptOnCacheTable = 8242, "HY000";
    AdminCheckTable = 8003, "HY000";
    MemoryExceedForQuery = 8175, "HY000";
    MemoryExceedForInstance = 8176, "HY000";
}

/// What a reader found blocking it: a lock from another transaction, to be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockInfo {
    /// The locked key.
    pub key: Vec<u8>,
    /// The primary key of the transaction holding the lock.
    pub primary: Vec<u8>,
    /// The start timestamp of that transaction.
    pub start_ts: Timestamp,
    /// Time to live in milliseconds, counted from the physical part of `start_ts`.
    pub ttl_ms: u64,
}

/// Strata's error.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// Something the user asked for is invalid or refers to something missing.
    #[error("{message}")]
    User {
        /// The MySQL error it maps to.
        code: Code,
        /// The message shown to the client.
        message: String,
    },
    /// Optimistic commit (or a pessimistic lock) found a newer committed write.
    #[error("Write conflict, txnStartTS={start_ts}, conflictCommitTS={conflict_ts}, key={key:?} [try again later]")]
    WriteConflict {
        /// Start ts of the losing transaction.
        start_ts: Timestamp,
        /// Commit ts of the write it conflicts with.
        conflict_ts: Timestamp,
        /// The key, raw.
        key: Vec<u8>,
    },
    /// A key is locked by another transaction that has to be resolved first.
    #[error("key is locked by transaction {}", .0.start_ts)]
    KeyLocked(Box<LockInfo>),
    /// A pessimistic lock waited longer than `innodb_lock_wait_timeout`.
    #[error("Lock wait timeout exceeded; try restarting transaction")]
    LockWaitTimeout,
    /// This transaction was chosen as a deadlock victim.
    #[error("Deadlock found when trying to get lock; try restarting transaction")]
    Deadlock,
    /// A key written with `Mutation::Insert` has a committed value: the caller turns it
    /// into the duplicate-key error naming the values (1062).
    #[error("Duplicate entry for key {key:?}")]
    AlreadyExists {
        /// The key, raw.
        key: Vec<u8>,
    },
    /// The transaction's locks were rolled back by someone else (it took too long).
    #[error("transaction {0} was rolled back by a conflicting reader; try restarting transaction")]
    TxnRolledBack(Timestamp),
    /// The storage engine failed.
    #[error("I/O error: {0}")]
    Io(String),
    /// A broken invariant: a bug in Strata.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// A user error with `code` and `message`.
    pub fn user(code: Code, message: impl Into<String>) -> Error {
        Error::User { code, message: message.into() }
    }

    /// Shorthand for a syntax / unsupported-syntax error.
    pub fn parse(message: impl Into<String>) -> Error {
        Error::user(Code::Parse, message)
    }

    /// Shorthand for an unsupported feature.
    pub fn unsupported(what: impl Into<String>) -> Error {
        Error::user(Code::NotSupported, format!("This version of Strata doesn't yet support '{}'", what.into()))
    }

    /// Shorthand for an internal error.
    pub fn internal(message: impl Into<String>) -> Error {
        Error::Internal(message.into())
    }

    /// The MySQL error code this error is reported as.
    pub fn code(&self) -> Code {
        match self {
            Error::User { code, .. } => *code,
            Error::WriteConflict { .. } => Code::WriteConflict,
            Error::LockWaitTimeout => Code::LockWaitTimeout,
            Error::Deadlock => Code::Deadlock,
            Error::TxnRolledBack(_) => Code::WriteConflict,
            Error::AlreadyExists { .. } => Code::DupEntry,
            Error::KeyLocked(_) | Error::Io(_) | Error::Internal(_) => Code::UnknownError,
        }
    }

    /// Whether the whole transaction may succeed if the client retries it.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::WriteConflict { .. } | Error::LockWaitTimeout | Error::Deadlock | Error::TxnRolledBack(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_mysql_numbers() {
        assert_eq!(Error::parse("x").code().number(), 1064);
        assert_eq!(Error::Deadlock.code().sqlstate(), "40001");
        assert_eq!(Error::LockWaitTimeout.code().number(), 1205);
        let e = Error::WriteConflict { start_ts: Timestamp(1), conflict_ts: Timestamp(2), key: vec![] };
        assert_eq!(e.code().number(), 9007);
        assert!(e.is_retryable());
    }
}
