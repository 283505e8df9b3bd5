//! The one way native failures reach JavaScript. Rust never formats a Node error itself: it
//! hands a plain description (`errno`/`syscall`/`path`/`dest` for file-system failures, `code`
//! and `file` for lock failures) to the error factory that `lib/native.js` registers for its
//! environment, which builds the error with Node's own errno mapping. Sync functions throw the
//! result, async ones reject with it.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::fserror::FsError;

/// What went wrong, in the terms the JS error factory needs.
#[napi(object)]
pub struct Failure {
    /// Negative errno (libuv convention) of a file-system failure.
    pub errno: Option<i32>,
    pub syscall: Option<String>,
    pub path: Option<String>,
    pub dest: Option<String>,
    /// `ELOCKED`, `ECOMPROMISED`, `ABORT_ERR`, `ERR_PI_NATIVE_INTERNAL`,
    /// `ERR_PI_NATIVE_INCOHERENT` (non file-system failures).
    pub code: Option<String>,
    /// The resolved target of a lock failure.
    pub file: Option<String>,
    pub message: Option<String>,
}

impl From<&FsError> for Failure {
    fn from(e: &FsError) -> Self {
        let mut f = Failure {
            errno: None,
            syscall: None,
            path: None,
            dest: None,
            code: None,
            file: None,
            message: None,
        };
        match e {
            FsError::Io {
                errno,
                syscall,
                path,
                dest,
                ..
            } => {
                f.errno = Some(*errno);
                f.syscall = Some(syscall.to_string());
                f.path = Some(path.clone());
                f.dest = dest.clone();
            }
            FsError::Locked { file } | FsError::Compromised { file } => {
                f.code = Some(e.code().to_string());
                f.file = Some(file.clone());
                f.message = Some(e.to_string());
            }
            FsError::Cancelled | FsError::Internal(_) => {
                f.code = Some(e.code().to_string());
                f.message = Some(e.to_string());
            }
            FsError::Incoherent { path } => {
                f.code = Some(e.code().to_string());
                f.path = Some(path.clone());
                f.message = Some(e.to_string());
            }
        }
        f
    }
}

/// Register the function that turns a [`Failure`] into the Error thrown or rejected with
/// (called once by `lib/native.js` in every environment that loads the addon).
#[napi(catch_unwind, ts_args_type = "factory: (failure: Failure) => Error")]
pub fn set_error_factory(env: &Env, factory: Function<Failure, Unknown<'static>>) -> Result<()> {
    super::env_data(env)?.error_factory = Some(factory.create_ref()?);
    Ok(())
}

/// The JS error for `e`, built by the environment's factory (a plain Error if none is set).
pub fn js_error(env: &Env, e: &FsError) -> Error {
    let built = env
        .get_instance_data::<super::EnvData>()
        .ok()
        .flatten()
        .and_then(|d| d.error_factory.as_ref())
        .and_then(|f| f.borrow_back(env).ok())
        .and_then(|f| f.call(Failure::from(e)).ok());
    match built {
        Some(value) => Error::from(value),
        None => Error::new(Status::GenericFailure, e.to_string()),
    }
}

/// A panic caught on a worker thread: a rejection that says so, never a wrong value.
pub fn internal() -> FsError {
    FsError::Internal("pi-native: internal failure in a worker thread".into())
}

/// Settle the outcome of `work` on the JS thread: `to_js` for a success, the environment's
/// error for a failure. The future runs on the runtime's few threads and must not block them:
/// its file-system calls go to [`crate::lanes`], its waits are timers.
pub fn settle<'e, T, V>(
    env: &'e Env,
    work: impl std::future::Future<Output = std::result::Result<T, FsError>> + Send + 'static,
    to_js: impl FnOnce(&Env, T) -> Result<V> + 'static,
) -> Result<PromiseRaw<'e, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
{
    env.spawn_future_with_callback(
        async move { Ok(work.await) },
        move |env, outcome| match outcome {
            Ok(v) => to_js(env, v),
            Err(e) => Err(js_error(env, &e)),
        },
    )
}

/// Run `work` on `lane` ([`crate::lanes`]: a local folder's, a network mount's own threads,
/// never libuv's pool) and settle on the JS thread; a panic becomes a rejection.
pub fn run<'e, T, V>(
    env: &'e Env,
    lane: crate::lanes::Lane,
    work: impl FnOnce() -> std::result::Result<T, FsError> + Send + 'static,
    to_js: impl FnOnce(&Env, T) -> Result<V> + 'static,
) -> Result<PromiseRaw<'e, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
{
    settle(
        env,
        async move {
            crate::lanes::run(lane, work)
                .await
                .unwrap_or_else(|| Err(internal()))
        },
        to_js,
    )
}

/// An operation that never waits (a read, or a store call's fast path), run on libuv's thread
/// pool as Node's own fs calls are: one `uv_queue_work` there and back, cheaper than a hop
/// through the runtime of [`run`] (fewer thread wake-ups), and drained by Node itself when the
/// environment is torn down. Nothing that sleeps may run here: it would hold a thread of the
/// pool the host's fs, dns and zlib calls share.
pub struct PoolHop<T: Send + 'static, V> {
    work: Option<Box<dyn FnOnce() -> std::result::Result<T, FsError> + Send>>,
    to_js: fn(&Env, T) -> Result<V>,
}

impl<T: Send + 'static, V: ToNapiValue + TypeName> Task for PoolHop<T, V> {
    type Output = std::result::Result<T, FsError>;
    type JsValue = V;

    fn compute(&mut self) -> Result<Self::Output> {
        let Some(work) = self.work.take() else {
            return Ok(Err(internal()));
        };
        // napi-rs does not catch a panic on the pool thread; a panic must not cross into libuv.
        Ok(std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .unwrap_or_else(|_| Err(internal())))
    }

    fn resolve(&mut self, env: Env, outcome: Self::Output) -> Result<V> {
        match outcome {
            Ok(v) => (self.to_js)(&env, v),
            Err(e) => Err(js_error(&env, &e)),
        }
    }
}

/// Run `work` on libuv's thread pool ([`PoolHop`]) and settle on the JS thread: `to_js` for a
/// success, the environment's error for a failure or a panic.
pub fn on_pool<'e, T: Send + 'static, V: ToNapiValue + TypeName + 'static>(
    env: &'e Env,
    work: impl FnOnce() -> std::result::Result<T, FsError> + Send + 'static,
    to_js: fn(&Env, T) -> Result<V>,
) -> Result<PromiseRaw<'e, V>> {
    let task = PoolHop {
        work: Some(Box::new(work)),
        to_js,
    };
    Ok(env.spawn(task)?.promise_object())
}

/// Run work that never waits off the JS thread, near the file or folder `path`: on libuv's
/// pool when its folder is known to be local (one `uv_queue_work` there and back, as Node's own
/// fs calls), else on the folder's lane ([`run`]): a call into a network folder may wait on a
/// server, and must not hold a thread of the pool the host's fs, dns and zlib calls share.
pub fn near<'e, T: Send + 'static, V: ToNapiValue + TypeName + 'static>(
    env: &'e Env,
    path: &str,
    work: impl FnOnce() -> std::result::Result<T, FsError> + Send + 'static,
    to_js: fn(&Env, T) -> Result<V>,
) -> Result<PromiseRaw<'e, V>> {
    match crate::lanes::of_file(path) {
        crate::lanes::Lane::Local => on_pool(env, work, to_js),
        lane => run(env, lane, work, to_js),
    }
}
