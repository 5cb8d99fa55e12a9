//! Record fields that hold one of a known set of words, as enums that keep any other word.
//!
//! A record is signed over its bytes, and records made by a newer build may hold a word this
//! build does not know. Each enum here has an `Other` variant that keeps such a word as
//! written, and (de)serialises as the bare string: a record read and written back is the same
//! bytes, so its signature still matches.

/// An enum of known words (`Variant = "word"`) and `Other(String)` for the rest, serialised as
/// the word.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A word this build does not know, kept as written.
            Other(String),
        }

        impl $name {
            /// Every word this build knows, in the order it lists them.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),*];

            /// The word, as records and output write it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(s) => s,
                }
            }

            /// The variant `word` names, else `Other(word)`.
            pub fn parse(word: &str) -> $name {
                match word {
                    $($text => $name::$variant,)*
                    _ => $name::Other(word.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, word: &str) -> bool {
                self.as_str() == word
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, word: &&str) -> bool {
                self.as_str() == *word
            }
        }

        impl From<&str> for $name {
            fn from(word: &str) -> $name {
                $name::parse(word)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let word = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Ok($name::parse(&word))
            }
        }
    };
}

open_enum! {
    /// What ended a command early (`tests.killed_by`); a command that ended by itself has none.
    pub enum KilledBy {
        /// It ran past its wall-clock timeout.
        Timeout = "timeout",
        /// It used up `[limits] cpu_seconds`.
        Cpu = "cpu",
        /// It printed more than `[limits] output_bytes`.
        Output = "output",
        /// It ran out of `[limits] memory_mb`.
        Memory = "memory",
        /// It hit the cap of `[limits] processes`.
        Processes = "processes",
        /// It wrote a file past `[limits] file_size_mb`.
        FileSize = "file_size",
        /// Its writes filled `[limits] disk_mb`.
        Disk = "disk",
        /// The user stopped it (Ctrl-C, a daemon shutting down).
        Interrupt = "interrupt",
        /// A signal no limit explains.
        Signal = "signal",
    }
}

open_enum! {
    /// How a file changed in a commit (`changes.files[].status`).
    pub enum ChangeStatus {
        Added = "added",
        Modified = "modified",
        Deleted = "deleted",
        Renamed = "renamed",
        /// A file that became a symlink or a submodule, or back.
        TypeChanged = "type_changed",
    }
}

open_enum! {
    /// The test runner whose output a run's counts were read from (`tests.framework`).
    pub enum Framework {
        Nextest = "nextest",
        Cargo = "cargo",
        Pytest = "pytest",
        Unittest = "unittest",
        Go = "go",
        Jest = "jest",
        Vitest = "vitest",
        Mocha = "mocha",
        Bun = "bun",
        Deno = "deno",
        /// `node --test`.
        Node = "node",
        Rspec = "rspec",
        Phpunit = "phpunit",
        /// CTest, CMake's test driver.
        Ctest = "ctest",
        /// A JUnit XML report, the runner's own or one printed into the output.
        Junit = "junit",
        /// `npm test` whose script names no runner this build knows.
        Npm = "npm",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_word_is_its_variant_and_an_unknown_one_is_kept_as_written() {
        let k: KilledBy = serde_json::from_str("\"file_size\"").unwrap();
        assert_eq!(k, KilledBy::FileSize);
        let odd = "\"w\\u00e4tchdog \\\"x\\\"\"";
        let k: KilledBy = serde_json::from_str(odd).unwrap();
        assert_eq!(k, KilledBy::Other("wätchdog \"x\"".into()));
        assert_eq!(serde_json::to_string(&k).unwrap(), "\"wätchdog \\\"x\\\"\"");
        for known in KilledBy::KNOWN {
            let text = serde_json::to_string(known).unwrap();
            assert_eq!(&serde_json::from_str::<KilledBy>(&text).unwrap(), known);
        }
        assert_eq!(Framework::parse("node").as_str(), "node");
        assert_eq!(
            ChangeStatus::from("type_changed"),
            ChangeStatus::TypeChanged
        );
        assert!(serde_json::from_str::<Framework>("3").is_err());
    }
}
