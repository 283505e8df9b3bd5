//! Turning a caller's CAS `expected` into [`Exp`] on the JS thread, with exactly the
//! distinctions `util.isDeepStrictEqual` makes against a parsed JSON value (B20): own
//! enumerable string keys, `undefined`-valued properties, -0, prototypes, holes, extra array
//! properties, symbol keys, cycles. Iterative, so depth cannot overflow the stack. Only values
//! that are not plain JSON data come here (plain data crosses as JSON text, `lib/expected.js`).
//! Written on napi-rs's safe value API: no raw N-API calls.

use std::collections::HashMap;

use napi::bindgen_prelude::*;
use napi::{JsString, JsValue, ValueType};

use crate::store::entry::Exp;

/// What the reader needs from one environment: the two prototypes a parsed JSON value can have.
pub struct Js<'e> {
    env: &'e Env,
    object_proto: Unknown<'e>,
    array_proto: Unknown<'e>,
}

impl<'e> Js<'e> {
    pub fn new(env: &'e Env) -> Result<Js<'e>> {
        let global = env.get_global()?;
        let proto = |ctor: &str| -> Result<Unknown<'e>> {
            // Constructors are functions: read them as values, then as objects.
            let c: Unknown<'e> = global.get_named_property(ctor)?;
            c.coerce_to_object()?.get_named_property("prototype")
        };
        Ok(Js {
            env,
            object_proto: proto("Object")?,
            array_proto: proto("Array")?,
        })
    }

    fn same(&self, a: Unknown<'e>, b: Unknown<'e>) -> Result<bool> {
        self.env.strict_equals(a, b)
    }

    /// Own enumerable keys, string ones (numbers as strings) and symbols apart. napi-rs's key
    /// filter takes one flag, so both kinds come in one list and are told apart by type.
    fn own_keys(&self, v: &Object<'e>) -> Result<(Vec<Unknown<'e>>, bool)> {
        let names = v.get_all_property_names(
            KeyCollectionMode::OwnOnly,
            KeyFilter::Enumerable,
            KeyConversion::NumbersToStrings,
        )?;
        let len = names.get_array_length()?;
        let mut strings = Vec::with_capacity(len as usize);
        let mut has_symbol = false;
        for i in 0..len {
            let k: Unknown<'e> = names.get_element(i)?;
            if k.get_type()? == ValueType::String {
                strings.push(k);
            } else {
                has_symbol = true;
            }
        }
        Ok((strings, has_symbol))
    }

    /// A JS string's UTF-16 code units (lone surrogates kept).
    fn utf16(&self, s: Unknown<'e>) -> Result<Vec<u16>> {
        Ok(Utf16String::from_unknown(s)?.to_vec())
    }

    /// `Number.isFinite(Date.parse(s))` asked of V8 itself (G7).
    pub fn date_parse_finite(&self, s: &[u16]) -> Result<bool> {
        let date: Unknown<'e> = self.env.get_global()?.get_named_property("Date")?;
        let date = date.coerce_to_object()?;
        let parse: Function<'e, JsString<'e>, f64> = date.get_named_property("parse")?;
        Ok(parse
            .apply(date, self.env.create_string_utf16(s)?)?
            .is_finite())
    }
}

enum Frame<'e> {
    Arr {
        value: Object<'e>,
        len: u32,
        items: Vec<Exp>,
    },
    Obj {
        value: Object<'e>,
        keys: Vec<(Vec<u16>, Unknown<'e>)>,
        members: Vec<(Vec<u16>, Exp)>,
    },
}

impl<'e> Frame<'e> {
    fn value(&self) -> Unknown<'e> {
        match self {
            Frame::Arr { value, .. } | Frame::Obj { value, .. } => value.to_unknown(),
        }
    }
}

/// Either a finished value or a container to descend into.
enum Step<'e> {
    Done(Exp),
    Open(Frame<'e>),
}

/// Convert `expected` (B20).
pub fn to_exp<'e>(js: &Js<'e>, root: Unknown<'e>) -> Result<Exp> {
    let mut stack: Vec<Frame<'e>> = Vec::new();
    let mut step = classify(js, root, &stack)?;
    loop {
        let mut done = match step {
            Step::Open(frame) => {
                stack.push(frame);
                None
            }
            Step::Done(v) => Some(v),
        };
        // Attach finished values upward and find the next child to look at.
        loop {
            let Some(top) = stack.last_mut() else {
                return Ok(done.unwrap_or(Exp::Never));
            };
            match top {
                Frame::Arr { value, len, items } => {
                    if let Some(v) = done.take() {
                        items.push(v);
                    }
                    if (items.len() as u32) < *len {
                        let child: Unknown<'e> = value.get_element(items.len() as u32)?;
                        step = classify(js, child, &stack)?;
                        break;
                    }
                    let Some(Frame::Arr { items, .. }) = stack.pop() else {
                        unreachable!("top is an array frame")
                    };
                    done = Some(Exp::Arr(items));
                }
                Frame::Obj {
                    value,
                    keys,
                    members,
                } => {
                    if let Some(v) = done.take() {
                        let (k, _) = keys[members.len()].clone();
                        members.push((k, v));
                    }
                    if members.len() < keys.len() {
                        let child: Unknown<'e> = value.get_property(keys[members.len()].1)?;
                        step = classify(js, child, &stack)?;
                        break;
                    }
                    let Some(Frame::Obj { members, .. }) = stack.pop() else {
                        unreachable!("top is an object frame")
                    };
                    done = Some(Exp::Obj(members));
                }
            }
        }
    }
}

fn classify<'e>(js: &Js<'e>, v: Unknown<'e>, ancestors: &[Frame<'e>]) -> Result<Step<'e>> {
    Ok(Step::Done(match v.get_type()? {
        ValueType::Undefined => Exp::Undefined,
        ValueType::Null => Exp::Null,
        ValueType::Boolean => Exp::Bool(bool::from_unknown(v)?),
        // Read as is: a coercion would not keep -0.
        ValueType::Number => Exp::Num(f64::from_unknown(v)?),
        ValueType::String => Exp::Str(js.utf16(v)?),
        ValueType::Object => {
            for a in ancestors {
                if js.same(a.value(), v)? {
                    return Ok(Step::Done(Exp::Never)); // a cycle never equals a finite tree
                }
            }
            let obj = v.coerce_to_object()?; // the object itself: it already is one
            let (keys, has_symbol) = js.own_keys(&obj)?;
            if has_symbol {
                return Ok(Step::Done(Exp::Never));
            }
            let proto = obj.get_prototype()?;
            if v.is_array()? {
                let len = obj.get_array_length()?;
                if !js.same(proto, js.array_proto)? || keys.len() != len as usize {
                    return Ok(Step::Done(Exp::Never));
                }
                // Exactly the indices 0..len: no holes, no extra properties.
                for (i, k) in keys.iter().enumerate() {
                    if js.utf16(*k)? != i.to_string().encode_utf16().collect::<Vec<u16>>() {
                        return Ok(Step::Done(Exp::Never));
                    }
                }
                return Ok(Step::Open(Frame::Arr {
                    value: obj,
                    len,
                    items: Vec::with_capacity(len as usize),
                }));
            }
            if !js.same(proto, js.object_proto)? {
                return Ok(Step::Done(Exp::Never));
            }
            let mut named = Vec::with_capacity(keys.len());
            for k in keys {
                named.push((js.utf16(k)?, k));
            }
            return Ok(Step::Open(Frame::Obj {
                value: obj,
                members: Vec::with_capacity(named.len()),
                keys: named,
            }));
        }
        _ => Exp::Never, // function, symbol, bigint, external
    }))
}

/// V8's verdict on every timestamp-position string of `expected` (startedAt, heartbeatAt,
/// terminal.observedAt, terminal.notificationDeliveredAt), so a worker thread can validate a
/// file equal to `expected` without calling back into JS.
fn member<'a>(ms: &'a [(Vec<u16>, Exp)], key: &str) -> Option<&'a Exp> {
    ms.iter()
        .find(|(k, _)| crate::json::utf16_eq(k, key))
        .map(|(_, v)| v)
}

pub fn expected_timestamps(js: &Js, exp: &Exp) -> Result<HashMap<Vec<u16>, bool>> {
    let mut out = HashMap::new();
    let Exp::Obj(members) = exp else {
        return Ok(out);
    };
    let mut strings: Vec<&Vec<u16>> = Vec::new();
    for key in ["startedAt", "heartbeatAt"] {
        if let Some(Exp::Str(s)) = member(members, key) {
            strings.push(s);
        }
    }
    if let Some(Exp::Obj(t)) = member(members, "terminal") {
        for key in ["observedAt", "notificationDeliveredAt"] {
            if let Some(Exp::Str(s)) = member(t, key) {
                strings.push(s);
            }
        }
    }
    for s in strings {
        if !out.contains_key(s) {
            out.insert(s.clone(), js.date_parse_finite(s)?);
        }
    }
    Ok(out)
}
