//! Answers within a byte budget: agents pay per token. A tool builds its answer; [`fit`] then
//! drops the tail of the longest lists (saying how many it dropped) and cuts the longest
//! strings until the JSON text fits. Paged tools fill their pages against the budget themselves
//! and hand a cursor on, so [`fit`] rarely has anything to do for them.

use serde_json::{Map, Value};

/// The budget of an answer, in bytes of JSON text.
pub const COMPACT: usize = 2048;
/// The budget when the caller asks for `detail`.
pub const DETAILED: usize = 32 * 1024;

pub fn budget(detail: bool) -> usize {
    if detail {
        DETAILED
    } else {
        COMPACT
    }
}

pub fn size(v: &Value) -> usize {
    serde_json::to_string(v).map_or(usize::MAX, |s| s.len())
}

/// Make `v` fit `budget` bytes of JSON text: drop the last items of the longest list (recording
/// `<name>_omitted` beside it and `truncated: true` at the top), else cut the longest string,
/// until it fits.
pub fn fit(mut v: Value, budget: usize) -> Value {
    let mut truncated = false;
    // Each pass removes something, so this ends; the bound is a guard.
    for _ in 0..10_000 {
        let mut total = size(&v);
        if truncated {
            total += r#","truncated":true"#.len();
        }
        if total <= budget {
            break;
        }
        let over = total - budget;
        if !shrink_list(&mut v) && !shrink_string(&mut v, over) {
            break;
        }
        truncated = true;
    }
    if truncated {
        if let Value::Object(m) = &mut v {
            m.insert("truncated".into(), Value::Bool(true));
        }
    }
    v
}

/// The path (object keys and array indexes) to the largest non-empty array, with its size.
fn largest_list(v: &Value) -> Option<(usize, Vec<Step>)> {
    let mut best: Option<(usize, Vec<Step>)> = None;
    let mut consider = |found: Option<(usize, Vec<Step>)>, step: Step| {
        if let Some((n, mut path)) = found {
            path.insert(0, step);
            if best.as_ref().is_none_or(|(b, _)| n > *b) {
                best = Some((n, path));
            }
        }
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let Value::Array(a) = x {
                    if !a.is_empty() {
                        consider(Some((size(x), Vec::new())), Step::Key(k.clone()));
                    }
                }
                consider(largest_list(x), Step::Key(k.clone()));
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                consider(largest_list(x), Step::Index(i));
            }
        }
        _ => {}
    }
    best
}

#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// Drop the last item of the largest list and count it in `<key>_omitted` beside it.
fn shrink_list(v: &mut Value) -> bool {
    let Some((_, path)) = largest_list(v) else {
        return false;
    };
    let (last, parents) = path.split_last().expect("a list is under some key");
    let mut at = &mut *v;
    for step in parents {
        at = match (step, at) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k).expect("path exists"),
            (Step::Index(i), Value::Array(a)) => &mut a[*i],
            _ => return false,
        };
    }
    let (Step::Key(key), Value::Object(parent)) = (last, at) else {
        return false;
    };
    if let Some(Value::Array(list)) = parent.get_mut(key) {
        list.pop();
    }
    bump(parent, &format!("{key}_omitted"));
    true
}

fn bump(m: &mut Map<String, Value>, key: &str) {
    let n = m.get(key).and_then(Value::as_u64).unwrap_or(0);
    m.insert(key.to_string(), Value::from(n + 1));
}

/// Cut the longest string by at least `over` bytes (it keeps a start and ends in `…`).
fn shrink_string(v: &mut Value, over: usize) -> bool {
    fn max_len(v: &Value) -> usize {
        match v {
            Value::String(s) => s.len(),
            Value::Object(m) => m.values().map(max_len).max().unwrap_or(0),
            Value::Array(a) => a.iter().map(max_len).max().unwrap_or(0),
            _ => 0,
        }
    }
    fn find(v: &mut Value, len: usize) -> Option<&mut String> {
        match v {
            Value::String(s) if s.len() == len => Some(s),
            Value::Object(m) => m.values_mut().find_map(|x| find(x, len)),
            Value::Array(a) => a.iter_mut().find_map(|x| find(x, len)),
            _ => None,
        }
    }
    let len = max_len(v);
    let Some(s) = find(v, len) else { return false };
    if s.len() <= 16 {
        return false;
    }
    let mut keep = s.len().saturating_sub(over + 4).max(12).min(s.len() - 4);
    while !s.is_char_boundary(keep) {
        keep -= 1;
    }
    s.truncate(keep);
    s.push('…');
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_long_list_is_cut_and_counted() {
        let items: Vec<Value> = (0..200)
            .map(|i| json!({"name": format!("test_{i}"), "message": "x".repeat(40)}))
            .collect();
        let v = fit(json!({"commit": "abc", "failures": items}), COMPACT);
        assert!(size(&v) <= COMPACT, "{}", size(&v));
        let kept = v["failures"].as_array().unwrap().len() as u64;
        assert!(kept > 0);
        assert_eq!(kept + v["failures_omitted"].as_u64().unwrap(), 200);
        assert_eq!(v["truncated"], true);
        assert_eq!(v["failures"][0]["name"], "test_0");
    }

    #[test]
    fn a_long_string_is_cut() {
        let v = fit(json!({"output": "y".repeat(10_000)}), COMPACT);
        assert!(size(&v) <= COMPACT);
        assert!(v["output"].as_str().unwrap().ends_with('…'));
    }

    #[test]
    fn what_fits_is_left_alone() {
        let v = json!({"a": [1, 2, 3], "b": "short"});
        assert_eq!(fit(v.clone(), COMPACT), v);
    }
}
