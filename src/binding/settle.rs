//! Settling promises from threads of lower priority without a lock the JS thread could wait for
//! (session recovery's scan threads run 10 nice levels below it).
//!
//! Why not napi-rs's `JsDeferred`, nor any Node-API thread-safe function: their settle holds a
//! lock across the write that wakes the JS thread (napi-rs's `pending_tsfn` lock around
//! `napi_call_threadsafe_function`, and Node's own queue mutex around `uv_async_send`). A JS
//! thread woken on the settling thread's CPU preempts it there, still holding the lock, then
//! blocks on that lock (Node's dispatch, napi-rs's finalizer) until the settling thread runs
//! again, which at its priority comes after every other busy thread on that CPU. Traced during
//! 20 whole-file recoveries beside two busy processes: 17–25 such waits, up to 16 ms each
//! (docs/ARCHITECTURE.md, "Settling from threads of lower priority").
//!
//! Here a settle pushes onto a lock-free stack and only then calls `uv_async_send`, itself
//! lock-free; the JS thread takes the whole stack in its libuv callback and resolves the raw
//! promises there, inside a callback scope (so their reactions run at once). One libuv async
//! handle per environment, referenced only while a promise of this module is pending, closed by
//! an async cleanup hook at teardown. Only where the JS layer says the host is Node
//! ([`use_libuv`]; other runtimes, such as Bun, may export libuv-named functions that do not
//! work) and the libuv functions can be found in the host process; elsewhere [`Outbox::here`]
//! answers None and callers use `JsDeferred`.
//!
//! napi-rs's safe API is used wherever it has a form (the event loop, the resource object and
//! its reference, strings, errors, handle scopes). The raw Node-API calls left each say why at
//! their use; in short: a deferred created and settled without a threadsafe function, an async
//! context and its callback scope (no napi-rs form), and an async cleanup hook that stays
//! registered until the libuv handle has closed (napi-rs's form removes it when its closure
//! returns).

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use napi::bindgen_prelude::{Null, Object, ObjectRef, ToNapiValue};
use napi::{sys, Env, JsValue};

type HandleSize = unsafe extern "C" fn(kind: i32) -> usize;
type AsyncCb = unsafe extern "C" fn(handle: *mut c_void);
type AsyncInit =
    unsafe extern "C" fn(event_loop: *mut c_void, handle: *mut c_void, cb: AsyncCb) -> i32;
type AsyncSend = unsafe extern "C" fn(handle: *mut c_void) -> i32;
type Close = unsafe extern "C" fn(handle: *mut c_void, cb: AsyncCb);
type Ref = unsafe extern "C" fn(handle: *mut c_void);

/// The libuv functions used, found in the host process at run time (the addon is not linked
/// against libuv: on Windows an import library would name one executable).
struct Uv {
    handle_size: HandleSize,
    async_init: AsyncInit,
    async_send: AsyncSend,
    close: Close,
    ref_: Ref,
    unref: Ref,
}

/// `UV_ASYNC` in libuv's `uv_handle_type` (stable across libuv 1.x).
const UV_ASYNC: i32 = 1;

fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| {
        // SAFETY: each symbol, when found, is the libuv function of that name, whose C signature
        // the field's type spells.
        unsafe {
            Some(Uv {
                handle_size: std::mem::transmute::<*mut c_void, HandleSize>(symbol(
                    c"uv_handle_size",
                )?),
                async_init: std::mem::transmute::<*mut c_void, AsyncInit>(symbol(
                    c"uv_async_init",
                )?),
                async_send: std::mem::transmute::<*mut c_void, AsyncSend>(symbol(
                    c"uv_async_send",
                )?),
                close: std::mem::transmute::<*mut c_void, Close>(symbol(c"uv_close")?),
                ref_: std::mem::transmute::<*mut c_void, Ref>(symbol(c"uv_ref")?),
                unref: std::mem::transmute::<*mut c_void, Ref>(symbol(c"uv_unref")?),
            })
        }
    })
    .as_ref()
}

/// The address of `name` among the symbols the host process exports, if any.
#[cfg(unix)]
fn symbol(name: &std::ffi::CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT only looks the name up.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// The address of `name` among the symbols the host executable exports, if any.
#[cfg(windows)]
fn symbol(name: &std::ffi::CStr) -> Option<*mut c_void> {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
    // SAFETY: the module handle of the executable needs no release; GetProcAddress only looks
    // the name up.
    unsafe {
        let exe = GetModuleHandleW(ptr::null());
        if exe.is_null() {
            return None;
        }
        GetProcAddress(exe, name.as_ptr().cast()).map(|f| f as *mut c_void)
    }
}

/// A raw Node-API deferred, created and settled on its environment's thread; only carried by
/// other threads. Raw: napi-rs's deferred (`JsDeferred`) settles through a threadsafe function,
/// whose lock is what this module exists to avoid, and `PromiseRaw` makes no deferred.
struct Deferred(sys::napi_deferred);
// SAFETY: the pointer is only dereferenced (by Node-API) on the environment's thread.
unsafe impl Send for Deferred {}

/// Whether the host is Node, whose libuv the outbox may use: set by the JS layer at load from
/// `process.release` and `process.versions` (lib/native.js). Off until then.
static USE_LIBUV: AtomicBool = AtomicBool::new(false);

/// The JS layer's word on whether the host is Node (see [`USE_LIBUV`]).
pub fn use_libuv(node: bool) {
    USE_LIBUV.store(node, Ordering::Relaxed);
}

/// A settled promise on its way to the JS thread.
struct Settled {
    deferred: Deferred,
    /// Builds the value on the JS thread: the resolution, or with `reject` the rejection.
    value: Box<dyn FnOnce(sys::napi_env) -> napi::Result<sys::napi_value> + Send>,
    reject: bool,
}

/// A node of the stack (`next` toward older ones).
struct Node {
    item: Settled,
    next: *mut Node,
}

/// What the settling threads share with the environment's thread: a lock-free stack of settled
/// promises, and the async handle while it is open.
struct Shared {
    uv: &'static Uv,
    head: AtomicPtr<Node>,
    /// The async handle's address, 0 once closed. Settling threads read it under this lock,
    /// which the JS thread takes (to write) only at teardown, never while serving settles.
    handle: RwLock<usize>,
}

impl Shared {
    /// Push `item`: a compare-and-swap loop on the head, which never waits for another thread.
    fn push(&self, item: Settled) {
        let node = Box::into_raw(Box::new(Node {
            item,
            next: ptr::null_mut(),
        }));
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` is ours until the exchange publishes it.
            unsafe { (*node).next = head };
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
    }

    /// Push `item`, then wake the JS thread (unless the handle is closed: teardown).
    ///
    /// The wake-up is a store-buffering pattern: this thread stores the head, then `uv_async_send`
    /// loads the handle's pending flag (a relaxed load in libuv's fast path) and sends nothing if
    /// it is still set; the JS thread clears that flag, then loads the head ([`Self::take_all`]).
    /// Each side needs its store ordered before its load, or both can miss (the push unseen,
    /// the send skipped) — allowed on arm64 and by x86's store buffer alike. The two SeqCst
    /// fences, here and in `take_all`, give exactly that.
    fn settle(&self, item: Settled) {
        self.push(item);
        fence(Ordering::SeqCst);
        let handle = self.handle.read().unwrap_or_else(|e| e.into_inner());
        if *handle != 0 {
            // SAFETY: the handle is open while the read lock is held: teardown clears it under
            // the write lock before closing it (so teardown may wait for this send to return).
            unsafe { (self.uv.async_send)(*handle as *mut c_void) };
        }
    }

    /// Everything pushed so far, oldest first (wait-free: one swap).
    fn take_all(&self) -> Vec<Settled> {
        // Paired with the fence in `settle`: libuv cleared the pending flag before this runs.
        fence(Ordering::SeqCst);
        let mut p = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        let mut items = Vec::new();
        while !p.is_null() {
            // SAFETY: the swap made this list ours; every node came from Box::into_raw.
            let node = unsafe { Box::from_raw(p) };
            p = node.next;
            items.push(node.item);
        }
        items.reverse();
        items
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        drop(self.take_all()); // promises of a torn-down environment: nothing left to settle
    }
}

/// A pending promise, settled from any thread by [`Ticket::resolve`]. Dropped unsettled (a
/// panic after the promise was taken), it rejects the promise, so that the handle does not
/// hold the event loop for an answer that will never come.
pub struct Ticket {
    deferred: Option<Deferred>,
    shared: Arc<Shared>,
}

impl Ticket {
    /// Resolve with the value `value` builds on the JS thread.
    pub fn resolve<V: ToNapiValue + Send + 'static>(mut self, value: V) {
        let Some(deferred) = self.deferred.take() else {
            return;
        };
        self.shared.settle(Settled {
            deferred,
            // SAFETY: called on the environment's thread, inside a handle scope (`drain`).
            value: Box::new(move |env| unsafe { V::to_napi_value(env, value) }),
            reject: false,
        });
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(deferred) = self.deferred.take() else {
            return;
        };
        self.shared.settle(Settled {
            deferred,
            value: Box::new(|env| {
                let err = napi::Error::new(
                    "ERR_PI_NATIVE_UNSETTLED",
                    "pi-native: the operation ended without an answer",
                );
                // SAFETY: on the environment's thread, inside a handle scope (`drain`).
                unsafe { napi::Error::to_napi_value(env, err) }
            }),
            reject: true,
        });
    }
}

/// One environment's end: its async handle and the state its libuv callback serves.
pub struct Outbox {
    env: sys::napi_env,
    uv: &'static Uv,
    handle: *mut c_void,
    shared: Arc<Shared>,
    pending: Cell<usize>,
    /// The async resource's object, held until teardown (then taken and released).
    resource: RefCell<Option<ObjectRef<false>>>,
    context: sys::napi_async_context,
    hook: Cell<sys::napi_async_cleanup_hook_handle>,
}

/// This thread's outbox (Node runs one environment per thread), or why it has none.
enum Slot {
    Untried,
    Made(Rc<Outbox>),
    /// Making it failed for this thread's environment: not tried again until that environment
    /// is torn down ([`forget_environment`]).
    Unavailable,
}

thread_local! {
    static OUTBOX: RefCell<Slot> = const { RefCell::new(Slot::Untried) };
}

/// At the teardown of this thread's environment: a failure to make its outbox is forgotten, so
/// an environment made later on this thread tries afresh (a made outbox closes itself, by its
/// own cleanup hook).
pub fn forget_environment() {
    OUTBOX.with(|o| {
        let mut o = o.borrow_mut();
        if matches!(*o, Slot::Unavailable) {
            *o = Slot::Untried;
        }
    });
}

impl Outbox {
    /// This environment's outbox, made on first use; None where it cannot be (the host is not
    /// Node, has no libuv to find, or a Node-API call failed).
    pub fn here(env: &napi::Env) -> Option<Rc<Outbox>> {
        if !USE_LIBUV.load(Ordering::Relaxed) {
            return None;
        }
        // The environment's teardown hook, which forgets a failure here, exists from now on.
        super::env_owner(env).ok()?;
        let raw = env.raw();
        let known = OUTBOX.with(|o| match &*o.borrow() {
            Slot::Made(o) => Some((o.env == raw).then(|| Rc::clone(o))),
            Slot::Unavailable => Some(None),
            Slot::Untried => None,
        });
        if let Some(known) = known {
            return known;
        }
        // SAFETY: on the environment's thread, inside a call from JS.
        let made = unsafe { Self::make(raw) };
        OUTBOX.with(|o| {
            *o.borrow_mut() = match &made {
                Some(m) => Slot::Made(Rc::clone(m)),
                None => Slot::Unavailable,
            }
        });
        made
    }

    /// # Safety
    /// On `env`'s thread, inside a call from JS.
    unsafe fn make(env: sys::napi_env) -> Option<Rc<Outbox>> {
        let uv = uv()?;
        let ok = |s: sys::napi_status| s == sys::Status::napi_ok;
        let js = Env::from_raw(env);
        let event_loop = js.get_uv_event_loop().ok().filter(|l| !l.is_null())?;
        let resource = Object::new(&js).ok()?;
        let name = js.create_string("pi-native:settle").ok()?;
        let resource_ref = resource.create_ref::<false>().ok()?;
        let mut context = ptr::null_mut();
        // SAFETY: plain Node-API and libuv calls on the environment's thread; the handle memory
        // is the size libuv gives for an async handle, pointer-aligned (u64 words), and lives
        // until its close callback.
        unsafe {
            // Raw: napi-rs has no form of an async context (napi_async_init/destroy, and the
            // callback scope opened with it in `drain`, which runs the promises' reactions).
            if !ok(sys::napi_async_init(
                env,
                resource.raw(),
                name.raw(),
                &mut context,
            )) {
                let _ = resource_ref.unref(&js);
                return None;
            }
            // What a failure from here on must give back (nothing is left behind).
            let undo = |context: sys::napi_async_context, resource_ref: ObjectRef<false>| {
                // Raw: the async context's end (see napi_async_init above).
                sys::napi_async_destroy(env, context);
                let _ = resource_ref.unref(&js);
            };
            let handle =
                Box::into_raw(vec![0u64; handle_words(uv)].into_boxed_slice()) as *mut c_void;
            if (uv.async_init)(event_loop.cast(), handle, serve) != 0 {
                free_handle(uv, handle);
                undo(context, resource_ref);
                return None;
            }
            // Nothing pending yet: the handle must not keep the loop alive.
            (uv.unref)(handle);
            let outbox = Rc::new(Outbox {
                env,
                uv,
                handle,
                shared: Arc::new(Shared {
                    uv,
                    head: AtomicPtr::new(ptr::null_mut()),
                    handle: RwLock::new(handle as usize),
                }),
                pending: Cell::new(0),
                resource: RefCell::new(Some(resource_ref)),
                context,
                hook: Cell::new(ptr::null_mut()),
            });
            let mut hook = ptr::null_mut();
            // Raw: the hook must stay registered until the handle's close callback has run (Node
            // waits for that before it tears the loop down); napi-rs's
            // `add_removable_async_cleanup_hook` removes it as soon as its closure returns.
            if !ok(sys::napi_add_async_cleanup_hook(
                env,
                Some(teardown),
                ptr::null_mut(),
                &mut hook,
            )) {
                // Without a way to close it at teardown the handle would outlive the loop.
                close(&outbox);
                if let Some(r) = outbox.resource.borrow_mut().take() {
                    undo(context, r);
                }
                return None;
            }
            outbox.hook.set(hook);
            Some(outbox)
        }
    }

    /// A new promise and the ticket that settles it; the handle keeps the loop alive until
    /// every such promise is settled.
    pub fn promise(&self) -> Option<(sys::napi_value, Ticket)> {
        let mut deferred = ptr::null_mut();
        let mut promise = ptr::null_mut();
        // Raw: a deferred of our own, settled in `drain` (see [`Deferred`]).
        // SAFETY: on the environment's thread (the outbox never leaves it).
        let made = unsafe { sys::napi_create_promise(self.env, &mut deferred, &mut promise) };
        if made != sys::Status::napi_ok {
            return None;
        }
        self.pending.set(self.pending.get() + 1);
        // SAFETY: the handle is open while the outbox is installed.
        unsafe { (self.uv.ref_)(self.handle) };
        Some((
            promise,
            Ticket {
                deferred: Some(Deferred(deferred)),
                shared: Arc::clone(&self.shared),
            },
        ))
    }

    /// Resolve everything settled so far (the JS thread, from the libuv callback).
    fn drain(&self) {
        let items = self.shared.take_all();
        if items.is_empty() {
            return;
        }
        // Counted off whatever follows: a promise that cannot be resolved (the environment is
        // going away) must not hold the loop either.
        self.pending
            .set(self.pending.get().saturating_sub(items.len()));
        let env = self.env;
        let js = Env::from_raw(env);
        // A handle scope around the values made here (this runs from the event loop, outside any
        // call from JS); inside it a callback scope, whose closing runs the promises' reactions.
        let _ = js.run_in_scope(|| {
            let resource = self
                .resource
                .borrow()
                .as_ref()
                .and_then(|r| r.get_value(&js).ok())
                .map(|o| o.raw());
            let mut callback_scope = ptr::null_mut();
            // SAFETY: Node-API calls on the environment's thread, from its event loop, inside the
            // handle scope. Raw: the callback scope of the async context (no napi-rs form) and
            // the settling of our own deferreds (see [`Deferred`]).
            unsafe {
                let in_callback = resource.is_some_and(|resource| {
                    sys::napi_open_callback_scope(env, resource, self.context, &mut callback_scope)
                        == sys::Status::napi_ok
                });
                for item in items {
                    let value = match (item.value)(env) {
                        Ok(v) => v,
                        Err(_) => Null::to_napi_value(env, Null).unwrap_or(ptr::null_mut()),
                    };
                    if item.reject {
                        sys::napi_reject_deferred(env, item.deferred.0, value);
                    } else {
                        sys::napi_resolve_deferred(env, item.deferred.0, value);
                    }
                }
                if in_callback {
                    // Raw, as its opening above: closing it runs the promises' reactions.
                    sys::napi_close_callback_scope(env, callback_scope);
                }
            }
            Ok(())
        });
        // Reactions may have made new calls: the loop is let go only with none pending.
        self.let_go_if_idle();
    }

    /// Stop holding the event loop when no promise of the outbox is pending.
    fn let_go_if_idle(&self) {
        if self.pending.get() == 0 {
            // SAFETY: the handle is open while the outbox is installed.
            unsafe { (self.uv.unref)(self.handle) };
        }
    }
}

/// The async handle's callback: serve this thread's outbox.
unsafe extern "C" fn serve(_handle: *mut c_void) {
    let outbox = OUTBOX.with(|o| match &*o.borrow() {
        Slot::Made(o) => Some(Rc::clone(o)),
        _ => None,
    });
    if let Some(outbox) = outbox {
        outbox.drain();
    }
}

/// Async cleanup hook of the environment: stop settles, close the handle, let the outbox go.
unsafe extern "C" fn teardown(_hook: sys::napi_async_cleanup_hook_handle, _arg: *mut c_void) {
    let outbox = OUTBOX.with(
        |o| match std::mem::replace(&mut *o.borrow_mut(), Slot::Untried) {
            Slot::Made(o) => Some(o),
            _ => None,
        },
    );
    if let Some(outbox) = outbox {
        // SAFETY: the environment is still alive while its cleanup hooks run. Raw: the async
        // context's end (see `Outbox::make`).
        unsafe { sys::napi_async_destroy(outbox.env, outbox.context) };
        if let Some(resource) = outbox.resource.borrow_mut().take() {
            let _ = resource.unref(&Env::from_raw(outbox.env));
        }
        close(&outbox);
    }
}

/// Close the handle (settling threads stop sending to it first); its close callback frees it and
/// removes the cleanup hook.
fn close(outbox: &Outbox) {
    *outbox
        .shared
        .handle
        .write()
        .unwrap_or_else(|e| e.into_inner()) = 0;
    CLOSING.with(|c| c.set(outbox.hook.get()));
    // SAFETY: the handle was initialised by uv_async_init and is closed once.
    unsafe { (outbox.uv.close)(outbox.handle, closed) };
}

thread_local! {
    /// The cleanup hook to remove once the handle closing on this thread is closed.
    static CLOSING: Cell<sys::napi_async_cleanup_hook_handle> = const { Cell::new(ptr::null_mut()) };
}

/// The close callback: free the handle's memory, then tell Node the cleanup is done.
unsafe extern "C" fn closed(handle: *mut c_void) {
    // The handle exists only where the libuv functions were found.
    if let Some(uv) = uv() {
        free_handle(uv, handle);
    }
    let hook = CLOSING.with(|c| c.replace(ptr::null_mut()));
    if !hook.is_null() {
        // SAFETY: the handle napi_add_async_cleanup_hook gave, removed once. Raw: it pairs with
        // the raw registration in `Outbox::make`, and tells Node the cleanup is done.
        unsafe { sys::napi_remove_async_cleanup_hook(hook) };
    }
}

/// An async handle's size in 8-byte words (its memory is a boxed slice of them: pointer-aligned).
fn handle_words(uv: &Uv) -> usize {
    // SAFETY: a plain query.
    unsafe { (uv.handle_size)(UV_ASYNC) }.div_ceil(8)
}

/// Free the memory of a handle made in [`Outbox::make`] (never initialised, or closed).
fn free_handle(uv: &Uv, handle: *mut c_void) {
    // SAFETY: allocated in `make` as a boxed slice of `handle_words(uv)` words, freed once.
    drop(unsafe {
        Box::from_raw(ptr::slice_from_raw_parts_mut(
            handle as *mut u64,
            handle_words(uv),
        ))
    });
}
