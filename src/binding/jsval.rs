//! Small helpers over raw JS values for the store binding: JS string conversion and TypeErrors
//! without napi-rs' extra `code` property. (JavaScript's own argument rules live in the JS
//! contract layer, `lib/contract/`.)

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
