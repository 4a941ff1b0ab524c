//! JSON merge patches (RFC 7386), the unit of DIFF's `rtn_data`: applying one to a
//! document, the smallest one between two documents (`diff`), and what a connection
//! owes its client between two `peek_message`s (`Pending`: later patches merged into
//! earlier ones whenever that is exact, with the size of the whole kept as it grows).
//! It owns only these operations on `serde_json::Value`s; it never knows what the tree
//! holds (quotes, charts, the trade), never does I/O and never fails: every input is a
//! JSON value and every result is defined.
//!
//! Our trees never hold a JSON `null` as an object member's value: in a merge patch a
//! null member means "delete", so a document with null members cannot be reached by
//! patches (`diff` would delete what it should set). Nulls inside arrays are fine
//! (arrays are replaced whole).

use std::fmt::Write;

use serde_json::{Map, Value};

/// Applies `patch` to `target` exactly as RFC 7386 says: a patch that is not an object
/// replaces the target; an object patch makes a non-object target `{}` first, then
/// deletes its null members' keys, merges its object members recursively and sets the
/// others.
pub fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(object) = target else { return };
    for (key, value) in members {
        if value.is_null() {
            object.remove(key);
        } else if value.is_object() {
            match object.get_mut(key) {
                Some(member) => apply(member, value),
                None => {
                    let mut member = Value::Null;
                    apply(&mut member, value);
                    object.insert(key.clone(), member);
                }
            }
        } else {
            object.insert(key.clone(), value.clone());
        }
    }
}

/// The smallest merge patch that turns `old` into `new`, or `None` when they are
/// equal. Objects are compared member by member (a member only `old` has becomes a
/// null); anything else that differs (a number, a string, an array, a change of type)
/// is replaced whole. Exact for documents without null members (see the module's
/// note): `apply(old, diff(old, new)) == new`.
pub fn diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            for (key, value) in new {
                let member = match old.get(key) {
                    Some(before) => diff(before, value),
                    None => Some(value.clone()),
                };
                if let Some(member) = member {
                    patch.insert(key.clone(), member);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if old == new => None,
        _ => Some(new.clone()),
    }
}

/// Whether one merge patch does what `pending` then `later` do, for every document
/// (`compose` says which pairs can be merged and merges them).
///
/// The pairs that cannot: somewhere `pending` replaces a node with a non-object (or
/// deletes it, with a null) and `later` patches that node with an object. Applied in
/// order, the node ends as exactly `later`'s object (its nulls dropped), whatever the
/// document had there; a merge patch cannot say "replace with this object" (an object
/// patch merges into what is there), so no single patch does it. Everywhere else the
/// two merge member by member: `later`'s non-objects (nulls included, which must stay
/// nulls to delete on the client) overwrite, its objects merge into `pending`'s objects
/// or stand where `pending` has nothing.
pub fn composable(pending: &Value, later: &Value) -> bool {
    let Value::Object(later) = later else { return true };
    let Value::Object(pending) = pending else { return false };
    later.iter().all(|(key, value)| match pending.get(key) {
        None => true,
        Some(before) => !value.is_object() || composable(before, value),
    })
}

/// Merges `later` into `pending` when one patch can do what the two do in order
/// (`composable`), and says whether it did; otherwise `pending` is left as it was and
/// the two must be sent as two patches.
pub fn compose(pending: &mut Value, later: &Value) -> bool {
    if !composable(pending, later) {
        return false;
    }
    merge(pending, later.clone());
    true
}

/// Merges `later` into `pending` (`composable` holds) and returns the change in
/// `pending`'s compact JSON length.
fn merge(pending: &mut Value, later: Value) -> isize {
    match (pending, later) {
        (Value::Object(pending), Value::Object(later)) => {
            let mut delta = 0;
            for (key, value) in later {
                match pending.get_mut(&key) {
                    Some(before) if before.is_object() && value.is_object() => {
                        delta += merge(before, value);
                    }
                    Some(before) => {
                        delta += signed(json_len(&value)) - signed(json_len(before));
                        *before = value;
                    }
                    None => {
                        let comma = usize::from(!pending.is_empty());
                        delta += signed(member_len(&key, &value) + comma);
                        pending.insert(key, value);
                    }
                }
            }
            delta
        }
        (pending, later) => {
            let delta = signed(json_len(&later)) - signed(json_len(pending));
            *pending = later;
            delta
        }
    }
}

fn signed(length: usize) -> isize {
    isize::try_from(length).unwrap_or(isize::MAX)
}

/// The length of `value` serialized as compact JSON (`serde_json::to_string`), counted
/// without writing it.
pub fn json_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(number) => {
            let mut counter = Counter(0);
            // Writing to a counter cannot fail.
            let _ = write!(counter, "{number}");
            counter.0
        }
        Value::String(text) => string_len(text),
        Value::Array(items) => {
            2 + items.iter().map(json_len).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(members) => {
            2 + members.iter().map(|(key, value)| member_len(key, value)).sum::<usize>()
                + members.len().saturating_sub(1)
        }
    }
}

/// `"key":value`.
fn member_len(key: &str, value: &Value) -> usize {
    string_len(key) + 1 + json_len(value)
}

/// A JSON string's length with its quotes and serde_json's escapes.
fn string_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

struct Counter(usize);

impl Write for Counter {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.0 += text.len();
        Ok(())
    }
}

/// The patches a connection owes its client: `rtn_data`'s `data`, in order. A patch
/// pushed is merged into the last one when one patch can do what the two do
/// (`composable`), and follows it otherwise; a patch that is not an object replaces
/// everything before it (it replaces the whole document). Applying the list taken, in
/// order, does exactly what applying every patch pushed, in order, would have done.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    patches: Vec<Value>,
    /// The compact JSON length of `patches` as a list (`[p1,p2]`), kept as it changes.
    bytes: usize,
}

impl Pending {
    pub fn new() -> Pending {
        Pending::default()
    }

    /// Adds `patch` after everything pending.
    pub fn push(&mut self, patch: Value) {
        if !patch.is_object() {
            self.patches.clear();
            self.bytes = 2 + json_len(&patch);
            self.patches.push(patch);
            return;
        }
        if let Some(last) = self.patches.last_mut() {
            if composable(last, &patch) {
                let delta = merge(last, patch);
                self.bytes = self.bytes.saturating_add_signed(delta);
                return;
            }
        }
        let comma = usize::from(!self.patches.is_empty());
        self.bytes = self.bytes.max(2) + comma + json_len(&patch);
        self.patches.push(patch);
    }

    pub fn is_empty(&self) -> bool {
        self.patches.is_empty()
    }

    /// How many patches are pending (after merging).
    pub fn len(&self) -> usize {
        self.patches.len()
    }

    /// The patches pending, in order.
    pub fn patches(&self) -> &[Value] {
        &self.patches
    }

    /// Everything pending, in order (one `rtn_data`'s `data`), leaving nothing.
    pub fn take(&mut self) -> Vec<Value> {
        self.bytes = 0;
        std::mem::take(&mut self.patches)
    }

    /// The size of what `take` would return, as compact JSON (`[p1,p2,…]`, 0 when
    /// nothing is pending), in bytes: the bound a connection checks to drop a client
    /// that does not keep up. Kept up to date at each `push`, at the cost of walking the
    /// parts of the pending patches that the pushed one replaces.
    pub fn approx_bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn apply_follows_the_rfc_examples() {
        // RFC 7386, appendix A.
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (json!({"a":"b","b":"c"}), json!({"a":null}), json!({"b":"c"})),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (json!({"a":{"b":"c"}}), json!({"a":{"b":"d","c":null}}), json!({"a":{"b":"d"}})),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (json!({}), json!({"a":{"bb":{"ccc":null}}}), json!({"a":{"bb":{}}})),
        ];
        for (mut target, patch, expected) in cases {
            apply(&mut target, &patch);
            assert_eq!(target, expected, "patch {patch}");
        }
    }

    #[test]
    fn diff_is_the_smallest_patch() {
        let old = json!({"quotes":{"A":{"last":1,"volume":5},"B":{"last":2}},"x":[1,2]});
        let new = json!({"quotes":{"A":{"last":1,"volume":6}},"x":[1,2],"y":"z"});
        assert_eq!(diff(&old, &new), Some(json!({"quotes":{"A":{"volume":6},"B":null},"y":"z"})));
        assert_eq!(diff(&old, &old), None);
        assert_eq!(diff(&json!(1), &json!({"a":1})), Some(json!({"a":1})));
        assert_eq!(diff(&json!({"a":1}), &json!([1])), Some(json!([1])));
    }

    #[test]
    fn a_delete_then_an_object_is_two_patches() {
        // The order is deleted, then made again: merged into one patch, its old fields
        // would survive on the client.
        let mut pending = Pending::new();
        pending.push(json!({"orders":{"o1":null}}));
        pending.push(json!({"orders":{"o1":{"status":"ALIVE"}}}));
        let patches = pending.take();
        assert_eq!(
            patches,
            vec![json!({"orders":{"o1":null}}), json!({"orders":{"o1":{"status":"ALIVE"}}})]
        );
        let mut client = json!({"orders":{"o1":{"status":"FINISHED","volume_left":0}}});
        for patch in &patches {
            apply(&mut client, patch);
        }
        assert_eq!(client, json!({"orders":{"o1":{"status":"ALIVE"}}}));
    }

    #[test]
    fn patches_merge_when_exact() {
        let mut pending = Pending::new();
        pending.push(json!({"quotes":{"A":{"last":1}}}));
        pending.push(json!({"quotes":{"A":{"last":2,"volume":3},"B":{"last":4}}}));
        pending.push(json!({"quotes":{"B":null}}));
        assert_eq!(pending.len(), 1);
        assert_eq!(pending.approx_bytes(), serde_json::to_string(pending.patches()).unwrap().len());
        assert_eq!(pending.take(), vec![json!({"quotes":{"A":{"last":2,"volume":3},"B":null}})]);
        assert!(pending.is_empty());
        assert_eq!(pending.approx_bytes(), 0);
    }

    #[test]
    fn a_replacement_drops_what_was_pending() {
        let mut pending = Pending::new();
        pending.push(json!({"a":1}));
        pending.push(json!(null));
        pending.push(json!({"b":2}));
        assert_eq!(pending.take(), vec![json!(null), json!({"b":2})]);
    }

    #[test]
    fn json_len_counts_escapes_and_numbers_as_serde_json_writes_them() {
        for value in [
            json!("a\"b\\c\n\u{1}\u{7f}é"),
            json!(1.5e300),
            json!(-0.0),
            json!(0.1),
            json!(u64::MAX),
            json!(i64::MIN),
            json!({"k\te":[null,true,false,{}],"":[]}),
        ] {
            assert_eq!(json_len(&value), serde_json::to_string(&value).unwrap().len(), "{value}");
        }
    }

    // --------------------------------------------------------------------------------
    // Properties, against the simplest model: applying patches one by one.

    /// A leaf: numbers (integers and floats), strings with characters to escape,
    /// booleans, and nulls when `nulls`.
    fn leaf(nulls: bool) -> BoxedStrategy<Value> {
        let values = prop_oneof![
            any::<bool>().prop_map(Value::from),
            (-3i64..1000).prop_map(Value::from),
            prop::num::f64::NORMAL.prop_map(Value::from),
            "[ab\"\\\n\u{1}é]{0,3}".prop_map(Value::from),
        ];
        if nulls {
            prop_oneof![1 => Just(Value::Null), 4 => values].boxed()
        } else {
            values.boxed()
        }
    }

    /// JSON documents of bounded depth, with keys from a small alphabet so that the
    /// members of two documents collide; object members are null only when `nulls`
    /// (array items may be null either way).
    fn document(nulls: bool) -> BoxedStrategy<Value> {
        leaf(nulls)
            .prop_recursive(4, 40, 5, move |inner| {
                prop_oneof![
                    prop::collection::vec(prop_oneof![Just(Value::Null), inner.clone()], 0..3)
                        .prop_map(Value::Array),
                    prop::collection::btree_map("[abcd]", inner, 0..5)
                        .prop_map(|members| Value::Object(members.into_iter().collect())),
                ]
            })
            .boxed()
    }

    /// Mostly objects, as a connection's patches are.
    fn object_document(nulls: bool) -> BoxedStrategy<Value> {
        prop::collection::btree_map("[abcd]", document(nulls), 0..5)
            .prop_map(|members| Value::Object(members.into_iter().collect()))
            .boxed()
    }

    fn patch() -> BoxedStrategy<Value> {
        prop_oneof![8 => object_document(true), 1 => document(true)].boxed()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn diff_takes_old_to_new(
            old in prop_oneof![3 => object_document(false), 1 => document(false)],
            new in prop_oneof![3 => object_document(false), 1 => document(false)],
        ) {
            let mut patched = old.clone();
            match diff(&old, &new) {
                Some(patch) => apply(&mut patched, &patch),
                None => prop_assert_eq!(&old, &new),
            }
            prop_assert_eq!(patched, new);
        }

        #[test]
        fn pending_does_what_its_patches_do_in_order(
            start in prop_oneof![3 => object_document(false), 1 => document(true)],
            patches in prop::collection::vec(patch(), 0..8),
        ) {
            let mut expected = start.clone();
            let mut pending = Pending::new();
            for patch in &patches {
                apply(&mut expected, patch);
                pending.push(patch.clone());
            }
            let sent = serde_json::to_string(pending.patches()).unwrap_or_default();
            let expected_bytes = if pending.is_empty() { 0 } else { sent.len() };
            prop_assert_eq!(pending.approx_bytes(), expected_bytes);
            let taken = pending.take();
            prop_assert!(taken.len() <= patches.len());
            let mut client = start;
            for patch in &taken {
                apply(&mut client, patch);
            }
            prop_assert_eq!(client, expected);
        }

        #[test]
        fn compose_is_exact_when_it_merges(
            start in document(true),
            first in patch(),
            second in patch(),
        ) {
            let mut expected = start.clone();
            apply(&mut expected, &first);
            apply(&mut expected, &second);
            let mut composed = first.clone();
            if compose(&mut composed, &second) {
                let mut once = start;
                apply(&mut once, &composed);
                prop_assert_eq!(once, expected);
            } else {
                prop_assert_eq!(composed, first);
            }
        }
    }
}
