//! git-sandbox's test map for mocha (`mocha_map.js`): which functions of the project each test
//! file calls, made by a run of its own off the critical path, as the pytest reporter's map mode
//! makes pytest's.
//!
//! Node loads the script first in every process the command starts, through `NODE_OPTIONS`
//! (`npm test` starts npm, a shell, then mocha), so the command is the user's, unchanged; the
//! script acts only in the process that loads mocha's Runner, and changes no test, order or
//! output there. It is written to the run's `TMPDIR` under a name made for the run, and writes
//! the map to a file of the tree named for the run, read back as an artifact.

const PRELOAD: &str = include_str!("mocha_map.js");

/// One map run's names: the script's and the map file's (relative to the directory the command
/// starts in, which is the root the map's paths are relative to).
pub struct MochaMap {
    script: String,
    pub file: String,
}

impl MochaMap {
    /// Names made for one run.
    pub fn new() -> MochaMap {
        let id = gs_util::random_hex(8);
        MochaMap {
            script: format!(".git-sandbox-mocha-map-{id}.js"),
            file: format!(".git-sandbox-mocha-map-{id}.json"),
        }
    }

    /// `line` (the user's command, unchanged) run with the script preloaded into node: written
    /// to the run's `TMPDIR`, the variables set, then the line in the same shell. When the
    /// script cannot be written the line runs as it is, and makes no map.
    pub fn wrap(&self, line: &str) -> String {
        let path = format!("${{TMPDIR:-/tmp}}/{}", self.script);
        format!(
            "if printf '%s' {source} 2>/dev/null > \"{path}\"; then \
             export NODE_OPTIONS=\"--require \\\"{path}\\\"${{NODE_OPTIONS:+ $NODE_OPTIONS}}\" \
             GIT_SANDBOX_JS_MAP=\"$PWD/{file}\" GIT_SANDBOX_JS_ROOT=\"$PWD\"; fi; {line}",
            source = gs_select::command::quote(PRELOAD),
            file = self.file,
        )
    }
}

impl Default for MochaMap {
    fn default() -> Self {
        MochaMap::new()
    }
}
