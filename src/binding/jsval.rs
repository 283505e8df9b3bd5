//! Small helpers over raw JS values: exact JS coercions (so messages and paths match what the
//! original JavaScript would build) and TypeErrors without napi-rs' extra `code` property.

use napi::bindgen_prelude::*;
use napi::{sys, JsValue};

/// Throw a plain `TypeError(msg)` (no `code`), as the JavaScript originals do.
pub fn type_error<T>(env: &Env, msg: &str) -> Result<T> {
    env.throw_type_error(msg, None)?;
    Err(Error::new(Status::PendingException, msg.to_string()))
}

/// Drop a pending JS exception left by a failed coercion; the caller maps it to a value.
fn clear_pending(env: sys::napi_env) {
    let mut ex = std::ptr::null_mut();
    // SAFETY: env is the live env of the current call; the out pointer is a valid local.
    unsafe { sys::napi_get_and_clear_last_exception(env, &mut ex) };
}

/// The JS `typeof`-level type of a value.
pub fn type_of(v: &Unknown) -> Result<ValueType> {
    v.get_type()
}

/// The number inside a value already known to be a JS number.
pub fn number_of(v: &Unknown) -> Result<f64> {
    // SAFETY: callers only use this after `type_of` returned `ValueType::Number`.
    unsafe { v.cast::<f64>() }
}

/// JS `Number(v)`; None when the conversion throws (symbols, bigint, throwing valueOf).
pub fn to_number(v: &Unknown) -> Option<f64> {
    match v.coerce_to_number() {
        Ok(n) => n.get_double().ok(),
        Err(_) => {
            clear_pending(v.value().env);
            None
        }
    }
}

/// JS `String(v)` (ToString); None when the conversion throws.
pub fn to_js_string(v: &Unknown) -> Option<String> {
    match v.coerce_to_string() {
        Ok(s) => s.into_utf8().ok()?.as_str().ok().map(str::to_owned),
        Err(_) => {
            clear_pending(v.value().env);
            None
        }
    }
}

/// `obj[key]` with JS semantics: primitives are boxed, nullish `obj` throws the engine's
/// `TypeError: Cannot read properties of null (reading 'key')`.
pub fn prop<'a>(env: &Env, obj: &Unknown<'a>, key: &str) -> Result<Unknown<'a>> {
    match type_of(obj)? {
        ValueType::Undefined => type_error(
            env,
            &format!("Cannot read properties of undefined (reading '{key}')"),
        ),
        ValueType::Null => type_error(
            env,
            &format!("Cannot read properties of null (reading '{key}')"),
        ),
        _ => obj.coerce_to_object()?.get_named_property(key),
    }
}

/// Node's ERR_INVALID_ARG_TYPE "Received …" tail for a value.
pub fn received(v: &Unknown) -> Result<String> {
    Ok(match type_of(v)? {
        ValueType::Undefined => "undefined".into(),
        ValueType::Null => "null".into(),
        ValueType::Boolean => format!("type boolean ({})", to_js_string(v).unwrap_or_default()),
        ValueType::Number => {
            // util.inspect keeps the sign of -0, String() does not.
            let x = number_of(v)?;
            let text = if x == 0.0 && x.is_sign_negative() {
                "-0".to_string()
            } else {
                to_js_string(v).unwrap_or_default()
            };
            format!("type number ({text})")
        }
        ValueType::BigInt => format!("type bigint ({}n)", to_js_string(v).unwrap_or_default()),
        ValueType::String => {
            let s = to_js_string(v).unwrap_or_default();
            let shown: String = if s.chars().count() > 28 {
                format!("{}...", s.chars().take(25).collect::<String>())
            } else {
                s
            };
            format!("type string ('{shown}')")
        }
        ValueType::Symbol => "type symbol".into(),
        ValueType::Function => {
            let name: Option<String> = v
                .coerce_to_object()?
                .get_named_property::<Unknown>("name")
                .ok()
                .and_then(|n| to_js_string(&n));
            format!("function {}", name.unwrap_or_default())
        }
        _ => {
            let ctor = v
                .coerce_to_object()?
                .get_named_property::<Unknown>("constructor")?;
            let name = if type_of(&ctor)? == ValueType::Function {
                ctor.coerce_to_object()?
                    .get_named_property::<Unknown>("name")
                    .ok()
                    .and_then(|n| to_js_string(&n))
            } else {
                None
            };
            match name {
                Some(n) if !n.is_empty() => format!("an instance of {n}"),
                // util.inspect of an object without a constructor; exact for `{}`, abridged
                // for objects with properties.
                _ if Object::keys(&v.coerce_to_object()?)?.is_empty() => {
                    "[Object: null prototype] {}".into()
                }
                _ => "[Object: null prototype] { … }".into(),
            }
        }
    })
}
