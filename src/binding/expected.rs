//! Turning a caller's CAS `expected` into [`Exp`] on the JS thread, with exactly the
//! distinctions `util.isDeepStrictEqual` makes against a parsed JSON value (B20): own
//! enumerable string keys, `undefined`-valued properties, -0, prototypes, holes, extra array
//! properties, symbol keys, cycles. Iterative, so depth cannot overflow the stack.

use std::collections::HashMap;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;

use crate::store::entry::Exp;

macro_rules! check {
    ($e:expr) => {{
        // SAFETY: every call below passes the live env of the current callback and valid
        // out-pointers to locals.
        let status = unsafe { $e };
        if status != sys::Status::napi_ok {
            return Err(Error::new(
                Status::from(status),
                "N-API call failed".to_string(),
            ));
        }
    }};
}

/// Raw helpers over one env.
pub struct Js {
    env: sys::napi_env,
    object_proto: sys::napi_value,
    array_proto: sys::napi_value,
}

impl Js {
    pub fn new(env: &Env) -> Result<Js> {
        let env = env.raw();
        let mut global = ptr::null_mut();
        check!(sys::napi_get_global(env, &mut global));
        let proto = |ctor: &std::ffi::CStr| -> Result<sys::napi_value> {
            let mut c = ptr::null_mut();
            check!(sys::napi_get_named_property(
                env,
                global,
                ctor.as_ptr(),
                &mut c
            ));
            let mut p = ptr::null_mut();
            check!(sys::napi_get_named_property(
                env,
                c,
                c"prototype".as_ptr(),
                &mut p
            ));
            Ok(p)
        };
        Ok(Js {
            env,
            object_proto: proto(c"Object")?,
            array_proto: proto(c"Array")?,
        })
    }

    fn type_of(&self, v: sys::napi_value) -> Result<sys::napi_valuetype> {
        let mut t = 0;
        check!(sys::napi_typeof(self.env, v, &mut t));
        Ok(t)
    }

    fn strict_equals(&self, a: sys::napi_value, b: sys::napi_value) -> Result<bool> {
        let mut r = false;
        check!(sys::napi_strict_equals(self.env, a, b, &mut r));
        Ok(r)
    }

    fn prototype(&self, v: sys::napi_value) -> Result<sys::napi_value> {
        let mut p = ptr::null_mut();
        check!(sys::napi_get_prototype(self.env, v, &mut p));
        Ok(p)
    }

    fn is_array(&self, v: sys::napi_value) -> Result<bool> {
        let mut r = false;
        check!(sys::napi_is_array(self.env, v, &mut r));
        Ok(r)
    }

    /// Own enumerable keys: strings (numbers as strings) or symbols only.
    fn own_keys(&self, v: sys::napi_value, symbols: bool) -> Result<Vec<sys::napi_value>> {
        let filter = if symbols {
            sys::KeyFilter::enumerable | sys::KeyFilter::skip_strings
        } else {
            sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols
        };
        let mut arr = ptr::null_mut();
        check!(sys::napi_get_all_property_names(
            self.env,
            v,
            sys::KeyCollectionMode::own_only,
            filter,
            sys::KeyConversion::numbers_to_strings,
            &mut arr
        ));
        let mut len = 0u32;
        check!(sys::napi_get_array_length(self.env, arr, &mut len));
        let mut out = Vec::with_capacity(len as usize);
        for i in 0..len {
            let mut k = ptr::null_mut();
            check!(sys::napi_get_element(self.env, arr, i, &mut k));
            out.push(k);
        }
        Ok(out)
    }

    fn get(&self, obj: sys::napi_value, key: sys::napi_value) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check!(sys::napi_get_property(self.env, obj, key, &mut v));
        Ok(v)
    }

    fn element(&self, arr: sys::napi_value, i: u32) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check!(sys::napi_get_element(self.env, arr, i, &mut v));
        Ok(v)
    }

    fn array_len(&self, arr: sys::napi_value) -> Result<u32> {
        let mut len = 0u32;
        check!(sys::napi_get_array_length(self.env, arr, &mut len));
        Ok(len)
    }

    /// A JS string's UTF-16 code units (lone surrogates kept). Short strings — nearly all
    /// keys and values of an entry — take one N-API call through a stack buffer.
    fn utf16(&self, s: sys::napi_value) -> Result<Vec<u16>> {
        let mut stack = [0u16; 128];
        let mut written = 0usize;
        check!(sys::napi_get_value_string_utf16(
            self.env,
            s,
            stack.as_mut_ptr(),
            stack.len(),
            &mut written
        ));
        if written < stack.len() - 1 {
            return Ok(stack[..written].to_vec());
        }
        let mut len = 0usize;
        check!(sys::napi_get_value_string_utf16(
            self.env,
            s,
            ptr::null_mut(),
            0,
            &mut len
        ));
        let mut buf = vec![0u16; len + 1];
        check!(sys::napi_get_value_string_utf16(
            self.env,
            s,
            buf.as_mut_ptr(),
            buf.len(),
            &mut written
        ));
        buf.truncate(written);
        Ok(buf)
    }

    fn double(&self, v: sys::napi_value) -> Result<f64> {
        let mut d = 0.0;
        check!(sys::napi_get_value_double(self.env, v, &mut d));
        Ok(d)
    }

    fn boolean(&self, v: sys::napi_value) -> Result<bool> {
        let mut b = false;
        check!(sys::napi_get_value_bool(self.env, v, &mut b));
        Ok(b)
    }

    /// `Number.isFinite(Date.parse(s))` asked of V8 itself (G7).
    pub fn date_parse_finite(&self, s: &[u16]) -> Result<bool> {
        let mut global = ptr::null_mut();
        check!(sys::napi_get_global(self.env, &mut global));
        let mut date = ptr::null_mut();
        check!(sys::napi_get_named_property(
            self.env,
            global,
            c"Date".as_ptr(),
            &mut date
        ));
        let mut parse = ptr::null_mut();
        check!(sys::napi_get_named_property(
            self.env,
            date,
            c"parse".as_ptr(),
            &mut parse
        ));
        let mut arg = ptr::null_mut();
        check!(sys::napi_create_string_utf16(
            self.env,
            s.as_ptr(),
            s.len() as isize,
            &mut arg
        ));
        let mut out = ptr::null_mut();
        check!(sys::napi_call_function(
            self.env, date, parse, 1, &arg, &mut out
        ));
        Ok(self.double(out)?.is_finite())
    }
}

enum Frame {
    Arr {
        value: sys::napi_value,
        len: u32,
        items: Vec<Exp>,
    },
    Obj {
        value: sys::napi_value,
        keys: Vec<(Vec<u16>, sys::napi_value)>,
        members: Vec<(Vec<u16>, Exp)>,
    },
}

impl Frame {
    fn value(&self) -> sys::napi_value {
        match self {
            Frame::Arr { value, .. } | Frame::Obj { value, .. } => *value,
        }
    }
}

/// Either a finished value or a container to descend into.
enum Step {
    Done(Exp),
    Open(Frame),
}

/// Convert `expected` (B20).
pub fn to_exp(js: &Js, root: sys::napi_value) -> Result<Exp> {
    let mut stack: Vec<Frame> = Vec::new();
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
                        let child = js.element(*value, items.len() as u32)?;
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
                        let child = js.get(*value, keys[members.len()].1)?;
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

fn classify(js: &Js, v: sys::napi_value, ancestors: &[Frame]) -> Result<Step> {
    use sys::ValueType as T;
    let t = js.type_of(v)?;
    Ok(Step::Done(match t {
        T::napi_undefined => Exp::Undefined,
        T::napi_null => Exp::Null,
        T::napi_boolean => Exp::Bool(js.boolean(v)?),
        T::napi_number => Exp::Num(js.double(v)?),
        T::napi_string => Exp::Str(js.utf16(v)?),
        T::napi_object => {
            for a in ancestors {
                if js.strict_equals(a.value(), v)? {
                    return Ok(Step::Done(Exp::Never)); // a cycle never equals a finite tree
                }
            }
            if !js.own_keys(v, true)?.is_empty() {
                return Ok(Step::Done(Exp::Never));
            }
            let proto = js.prototype(v)?;
            let keys = js.own_keys(v, false)?;
            if js.is_array(v)? {
                let len = js.array_len(v)?;
                if !js.strict_equals(proto, js.array_proto)? || keys.len() != len as usize {
                    return Ok(Step::Done(Exp::Never));
                }
                // Exactly the indices 0..len: no holes, no extra properties.
                for (i, k) in keys.iter().enumerate() {
                    if js.utf16(*k)? != i.to_string().encode_utf16().collect::<Vec<u16>>() {
                        return Ok(Step::Done(Exp::Never));
                    }
                }
                return Ok(Step::Open(Frame::Arr {
                    value: v,
                    len,
                    items: Vec::with_capacity(len as usize),
                }));
            }
            if !js.strict_equals(proto, js.object_proto)? {
                return Ok(Step::Done(Exp::Never));
            }
            let mut named = Vec::with_capacity(keys.len());
            for k in keys {
                named.push((js.utf16(k)?, k));
            }
            return Ok(Step::Open(Frame::Obj {
                value: v,
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
