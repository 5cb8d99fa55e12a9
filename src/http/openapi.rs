//! The API's OpenAPI 3.1 description, made from the code: each route's parameters and body come
//! from the JSON Schema of the very type its handler parses (schemars), so the description and
//! the server cannot drift apart. Served at `/api/v1/openapi.json`.

use super::api::{
    CreateRepository, EventsQuery, FlakyQuery, KillBody, LogQuery, PromoteBody, RunBody, RunsQuery,
    StreamQuery,
};
use super::workspaces::{CommitBody, ExecBody, NewBody, RemoveQuery, WriteBody};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

fn schema<T: JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.remove("$schema");
        m.remove("title");
    }
    v
}

/// The query parameters of a query type: one per property.
fn query_params<T: JsonSchema>() -> Vec<Value> {
    let s = schema::<T>();
    let required: Vec<&str> = s["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    s["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(name, p)| {
                    let mut p = p.clone();
                    let description = p
                        .as_object_mut()
                        .and_then(|m| m.remove("description"))
                        .unwrap_or(Value::Null);
                    json!({
                        "name": name,
                        "in": "query",
                        "required": required.contains(&name.as_str()),
                        "description": description,
                        "schema": nullable_to_plain(p),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `{"type": ["integer", "null"]}` as a query parameter is just `{"type": "integer"}`: an
/// absent parameter is the null.
fn nullable_to_plain(mut p: Value) -> Value {
    if let Some(types) = p["type"].as_array() {
        let plain: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if plain.len() == 1 {
            p["type"] = plain[0].clone();
        }
    }
    p
}

fn path_param(name: &str, description: &str, integer: bool) -> Value {
    json!({
        "name": name, "in": "path", "required": true, "description": description,
        "schema": if integer { json!({"type": "integer", "format": "int64"}) } else { json!({"type": "string", "minLength": 1}) },
    })
}

fn body<T: JsonSchema>(required: bool) -> Value {
    json!({"required": required, "content": {"application/json": {"schema": schema::<T>()}}})
}

/// One operation: what it does, the role it needs, its parameters and body, its answers.
fn op(
    summary: &str,
    role: Option<&str>,
    params: Vec<Value>,
    body: Option<Value>,
    ok: &[&str],
) -> Value {
    let mut responses = Map::new();
    for code in ok {
        responses.insert(
            code.to_string(),
            json!({"description": "success", "content": {"application/json": {"schema": {"type": "object"}}}}),
        );
    }
    let error = |d: &str| json!({"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    if role.is_some() {
        responses.insert("401".into(), error("no valid token"));
        responses.insert("403".into(), error("the token's role is too low"));
    }
    responses.insert("400".into(), error("bad parameters or body"));
    responses.insert(
        "404".into(),
        error("unknown repository, experiment, commit or run"),
    );
    // The statuses of the other kinds of error (`http::status_of`).
    responses.insert(
        "409".into(),
        error("refused, and nothing was changed: a conflict, or what a policy does not allow"),
    );
    responses.insert(
        "503".into(),
        error("the shared index cannot be reached now; try again"),
    );
    let mut o = json!({
        "summary": summary,
        "parameters": params,
        "responses": responses,
    });
    match role {
        Some(r) => {
            o["description"] = format!("Needs a `{r}` token.").into();
            o["security"] = json!([{"token": []}]);
        }
        None => o["security"] = json!([]),
    }
    if let Some(b) = body {
        o["requestBody"] = b;
        o["responses"]["413"] = error("the body is over 64 KB");
    }
    o
}

pub fn document() -> Value {
    let repo = || path_param("repo", "a repository's id or name", false);
    let name = || path_param("name", "an experiment's name", false);
    let ws = || path_param("name", "a workspace's name", false);
    let file = || path_param("path", "a path relative to the workspace's root", false);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "git-sandbox",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Results, experiments and runs of the daemon's repositories. Send a token as `Authorization: Bearer TOKEN` (`git sandbox token create`).",
        },
        "servers": [{"url": "/"}],
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "kind", "hints"],
                    "properties": {
                        "error": {"type": "string"},
                        "kind": {"type": "string"},
                        "hints": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
        "security": [{"token": []}],
        "paths": {
            "/api/v1/health": {"get": op("Whether the daemon answers", None, vec![], None, &["200"])},
            "/api/v1/repositories": {
                "get": op("The repositories with their counts", Some("read"), vec![], None, &["200"]),
                "post": op("Create a repository (as `git sandbox new`)", Some("admin"), vec![], Some(body::<CreateRepository>(true)), &["201"]),
            },
            "/api/v1/repositories/{repo}": {
                "get": op("A repository with its counts, as the list gives it, and phase one's recall by faulty commit and by failing test", Some("read"), vec![repo()], None, &["200"]),
            },
            "/api/v1/repositories/{repo}/experiments": {
                "get": op("Experiments ranked against production", Some("read"), vec![repo()], None, &["200"]),
            },
            "/api/v1/repositories/{repo}/flaky": {
                "get": op("Flaky tests over a window (flake rate, flips, state) and quarantined tests, as `git sandbox flaky` lists them", Some("read"), [vec![repo()], query_params::<FlakyQuery>()].concat(), None, &["200"]),
            },
            "/api/v1/experiments/{repo}/{name}": {
                "get": op("An experiment with its commits, result and evaluation", Some("read"), vec![repo(), name()], None, &["200"]),
            },
            "/api/v1/experiments/{repo}/{name}/eval": {
                "post": op("Evaluate against production (runs heads without a result)", Some("run"), vec![repo(), name()], None, &["200"]),
            },
            "/api/v1/experiments/{repo}/{name}/promote": {
                "post": op("Promote into production, or a dry run", Some("admin"), vec![repo(), name()], Some(body::<PromoteBody>(false)), &["200"]),
            },
            "/api/v1/experiments/{repo}/{name}/kill": {
                "post": op("Kill: archive (or delete) the branch", Some("admin"), vec![repo(), name()], Some(body::<KillBody>(false)), &["200"]),
            },
            "/api/v1/commits/{repo}/{sha}": {
                "get": op("A commit's run record", Some("read"), vec![repo(), path_param("sha", "a commit id or any revision", false)], None, &["200"]),
            },
            "/api/v1/runs": {
                "get": op("Runs, paged by id", Some("read"), query_params::<RunsQuery>(), None, &["200"]),
                "post": op("Queue a revision (idempotent by tree and config); with until, wait for its result or its first failure", Some("run"), vec![], Some(body::<RunBody>(true)), &["200", "202"]),
            },
            "/api/v1/runs/{id}/log": {
                "get": op("A run's output, paged", Some("read"), [vec![path_param("id", "a run id", true)], query_params::<LogQuery>()].concat(), None, &["200"]),
            },
            "/api/v1/daemons": {
                "get": op("The daemons that served this index (running, stopped, lost) and the queue", Some("read"), vec![], None, &["200"]),
            },
            "/api/v1/events": {
                "get": op("Events, paged by id", Some("read"), query_params::<EventsQuery>(), None, &["200"]),
            },
            "/api/v1/workspaces/{repo}": {
                "get": op("The repository's workspaces: base, branch, size, last use, budget", Some("read"), vec![repo()], None, &["200"]),
                "post": op("Start a workspace: its experiment's branch and a live sandbox on it", Some("run"), vec![repo()], Some(body::<NewBody>(true)), &["201"]),
            },
            "/api/v1/workspaces/{repo}/{name}": {
                "get": op("One workspace", Some("read"), vec![repo(), ws()], None, &["200"]),
                "delete": op("Remove a workspace (its branch stays unless kill=true)", Some("admin"), [vec![repo(), ws()], query_params::<RemoveQuery>()].concat(), None, &["200"]),
            },
            "/api/v1/workspaces/{repo}/{name}/exec": {
                "post": op("Run a command in the workspace: exit code, files changed, the end of its output", Some("run"), vec![repo(), ws()], Some(body::<ExecBody>(true)), &["200"]),
            },
            "/api/v1/workspaces/{repo}/{name}/files/{path}": {
                "get": op("A file of the workspace (its content), or a directory's entries", Some("read"), vec![repo(), ws(), file()], None, &["200"]),
                "put": op("Write a file of the workspace (made, or replaced whole)", Some("run"), vec![repo(), ws(), file()], Some(body::<WriteBody>(true)), &["200"]),
            },
            "/api/v1/workspaces/{repo}/{name}/diff": {
                "get": op("The workspace's changes against its base, as a unified diff", Some("read"), vec![repo(), ws()], None, &["200"]),
            },
            "/api/v1/workspaces/{repo}/{name}/commit": {
                "post": op("Commit the workspace's changes on its branch and queue the commit's run", Some("run"), vec![repo(), ws()], Some(body::<CommitBody>(true)), &["200"]),
            },
            "/api/v1/events/stream": {
                "get": {
                    "summary": "Events as server-sent events; resumes from Last-Event-ID",
                    "description": "Needs a `read` token.",
                    "x-streaming": true,
                    "parameters": query_params::<StreamQuery>(),
                    "responses": {"200": {"description": "an event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}},
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    /// Each route of the API is in its description and each described path is routed:
    /// schemathesis, and clients made from the description, see only what it describes.
    #[test]
    fn every_route_is_described() {
        let doc = super::document();
        let described: Vec<&str> = doc["paths"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // The first string literal after each `.route(` of api.rs; the description itself is
        // served beside the paths it describes.
        let routes = [include_str!("api.rs"), include_str!("workspaces.rs")].concat();
        let routed: Vec<String> = routes
            .split(".route(")
            .skip(1)
            .filter_map(|r| r.split('"').nth(1))
            .filter(|p| *p != "/api/v1/openapi.json")
            // axum's wildcard `{*path}` is OpenAPI's `{path}`.
            .map(|p| p.replace("{*", "{"))
            .collect();
        let routed: Vec<&str> = routed.iter().map(String::as_str).collect();
        assert!(routed.len() >= 14, "{routed:?}");
        for p in &routed {
            assert!(described.contains(p), "{p} is routed but not described");
        }
        for p in &described {
            assert!(routed.contains(p), "{p} is described but not routed");
        }
    }
}
