//! A small safe wrapper over isl, the integer set library (the one Polly, PPCG and Pluto use),
//! loaded at run time from the shared library Debian ships with gcc (`libisl.so.23`, package
//! `libisl23`; `TEML_ISL` names another file). No isl type leaves this module: values are
//! built from isl's own text syntax and read back as text.
//!
//! Why loaded at run time: gcc itself depends on `libisl23`, so every machine that can compile
//! teml's kernels already has it, while its headers (`libisl-dev`) and the `isl-rs` crate's
//! autotools build of bundled sources would add a build-time dependency for a dozen calls. A
//! missing library is a clear error naming the package, never a link error.

use libloading::Library;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

type Ptr = *mut c_void;

/// The isl functions teml calls, resolved once.
struct Api {
    _lib: Library,
    ctx_alloc: unsafe extern "C" fn() -> Ptr,
    ctx_free: unsafe extern "C" fn(Ptr),
    ctx_last_error_msg: unsafe extern "C" fn(Ptr) -> *const c_char,
    ctx_last_error: unsafe extern "C" fn(Ptr) -> c_int,
    ctx_set_max_operations: unsafe extern "C" fn(Ptr, std::ffi::c_ulong),
    ctx_abort: unsafe extern "C" fn(Ptr),
    ctx_resume: unsafe extern "C" fn(Ptr),
    ctx_reset_operations: unsafe extern "C" fn(Ptr),
    ctx_reset_error: unsafe extern "C" fn(Ptr),
    options_set_on_error: unsafe extern "C" fn(Ptr, c_int) -> c_int,
    umap_read: unsafe extern "C" fn(Ptr, *const c_char) -> Ptr,
    umap_copy: unsafe extern "C" fn(Ptr) -> Ptr,
    umap_free: unsafe extern "C" fn(Ptr) -> Ptr,
    umap_to_str: unsafe extern "C" fn(Ptr) -> *mut c_char,
    umap_reverse: unsafe extern "C" fn(Ptr) -> Ptr,
    umap_apply_range: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    umap_intersect: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    umap_union: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    umap_subtract: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    umap_is_empty: unsafe extern "C" fn(Ptr) -> c_int,
    umap_lex_lt: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    umap_lex_ge: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    umap_intersect_params: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    umap_coalesce: unsafe extern "C" fn(Ptr) -> Ptr,
    umap_sample: unsafe extern "C" fn(Ptr) -> Ptr,
    umap_lexmin: unsafe extern "C" fn(Ptr) -> Ptr,
    bmap_to_str: unsafe extern "C" fn(Ptr) -> *mut c_char,
    bmap_free: unsafe extern "C" fn(Ptr) -> Ptr,
    set_read: unsafe extern "C" fn(Ptr, *const c_char) -> Ptr,
}

/// `ISL_ON_ERROR_CONTINUE`: errors are reported through the context, not printed.
const ON_ERROR_CONTINUE: c_int = 1;

/// `isl_error_abort`: the operation was stopped by `isl_ctx_abort` (Ctrl-C).
const ERROR_ABORT: c_int = 1;

/// `isl_error_quota`: the context's operation limit was reached.
const ERROR_QUOTA: c_int = 6;

/// The operations one isl context may perform (`isl_ctx_set_max_operations`) unless
/// `TEML_ISL_MAX_OPERATIONS` says otherwise: every legality question of the shipped programs
/// takes far fewer; a question past it is answered "cannot decide" instead of running for
/// minutes.
pub const MAX_OPERATIONS: u64 = 20_000_000;

/// The operation limit in force.
pub fn max_operations() -> u64 {
    std::env::var("TEML_ISL_MAX_OPERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(MAX_OPERATIONS)
}

/// The first words of the error an isl question gives when it ran past [`max_operations`] or
/// was stopped by Ctrl-C: callers tell it from the other isl errors by this prefix.
pub const UNDECIDED: &str = "cannot decide legality within the limit";

/// The live contexts, as addresses: Ctrl-C aborts their current operation.
static LIVE: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// Once, in a process that catches Ctrl-C (the REPL): a thread that aborts the live contexts'
/// operations when Ctrl-C is pressed (`isl_ctx_abort` only sets a flag isl polls; it is safe
/// from another thread).
fn watch_interrupts(api: &'static Api) {
    static STARTED: std::sync::Once = std::sync::Once::new();
    if !crate::runtime::interrupt::caught() {
        return;
    }
    STARTED.call_once(|| {
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_millis(20));
                if crate::runtime::interrupt::requested() {
                    let live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
                    for &raw in live.iter() {
                        // SAFETY: a context stays in LIVE only while it is alive (Drop removes it
                        // under this lock before freeing it).
                        unsafe { (api.ctx_abort)(raw as Ptr) };
                    }
                }
            }
        });
    });
}

fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Api, String> {
    let names: Vec<String> = match std::env::var("TEML_ISL") {
        Ok(p) => vec![p],
        Err(_) => ["libisl.so.23", "libisl.so", "libisl.23.dylib", "libisl.dylib"].map(String::from).to_vec(),
    };
    let mut last = String::new();
    for n in &names {
        // SAFETY: loading isl runs no initialisation code with preconditions.
        match unsafe { Library::new(n) } {
            Ok(lib) => return resolve(lib),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!(
        "the integer set library isl is not installed (tried {}: {last}); install it with \
         `apt-get install libisl23` (it comes with gcc), or set TEML_ISL to its path",
        names.join(", ")
    ))
}

fn resolve(lib: Library) -> Result<Api, String> {
    macro_rules! f {
        ($name:literal) => {
            // SAFETY: the symbol is declared above with isl's C signature (isl 0.2x).
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("isl has no function {}: {e}", $name))?
        };
    }
    Ok(Api {
        ctx_alloc: f!("isl_ctx_alloc"),
        ctx_free: f!("isl_ctx_free"),
        ctx_last_error_msg: f!("isl_ctx_last_error_msg"),
        ctx_last_error: f!("isl_ctx_last_error"),
        ctx_set_max_operations: f!("isl_ctx_set_max_operations"),
        ctx_abort: f!("isl_ctx_abort"),
        ctx_resume: f!("isl_ctx_resume"),
        ctx_reset_operations: f!("isl_ctx_reset_operations"),
        ctx_reset_error: f!("isl_ctx_reset_error"),
        options_set_on_error: f!("isl_options_set_on_error"),
        umap_read: f!("isl_union_map_read_from_str"),
        umap_copy: f!("isl_union_map_copy"),
        umap_free: f!("isl_union_map_free"),
        umap_to_str: f!("isl_union_map_to_str"),
        umap_reverse: f!("isl_union_map_reverse"),
        umap_apply_range: f!("isl_union_map_apply_range"),
        umap_intersect: f!("isl_union_map_intersect"),
        umap_union: f!("isl_union_map_union"),
        umap_subtract: f!("isl_union_map_subtract"),
        umap_is_empty: f!("isl_union_map_is_empty"),
        umap_lex_lt: f!("isl_union_map_lex_lt_union_map"),
        umap_lex_ge: f!("isl_union_map_lex_ge_union_map"),
        umap_intersect_params: f!("isl_union_map_intersect_params"),
        umap_coalesce: f!("isl_union_map_coalesce"),
        umap_sample: f!("isl_union_map_sample"),
        umap_lexmin: f!("isl_union_map_lexmin"),
        bmap_to_str: f!("isl_basic_map_to_str"),
        bmap_free: f!("isl_basic_map_free"),
        set_read: f!("isl_set_read_from_str"),
        _lib: lib,
    })
}

/// True if isl can be loaded on this machine.
pub fn available() -> Result<(), String> {
    api().map(|_| ())
}

/// An isl context: every value made in it lives no longer than it.
pub struct Ctx {
    api: &'static Api,
    raw: Ptr,
    /// The maps read from text so far, by their text: a legality question reads the same
    /// relations (a nest's domain, the lexicographic order of its times) as the questions
    /// before it, and isl takes milliseconds to read a long one. isl's maps are copied on
    /// write, so a cached map is shared by reference count.
    read: std::cell::RefCell<std::collections::HashMap<String, Ptr>>,
}

/// Maps a context keeps read ([`Ctx::map`]) at most (then forgets them all at once).
const READ_CACHE: usize = 2048;

thread_local! {
    /// This thread's context for [`with_ctx`].
    static SHARED: std::cell::OnceCell<Result<Ctx, String>> = const { std::cell::OnceCell::new() };
    /// How deep [`with_ctx`] calls are nested on this thread.
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `f` with this thread's isl context, which lives as long as the thread and keeps the
/// maps it read: the questions of one search (a tuner's candidates, the rules that generate a
/// space) read the same relations again and again. Each outermost call starts with a fresh
/// operation budget ([`max_operations`]) and no pending Ctrl-C abort.
pub fn with_ctx<R>(f: impl FnOnce(&Ctx) -> Result<R, String>) -> Result<R, String> {
    struct Nested;
    impl Drop for Nested {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get() - 1));
        }
    }
    SHARED.with(|cell| {
        let ctx = cell.get_or_init(Ctx::new).as_ref().map_err(Clone::clone)?;
        if DEPTH.with(|d| d.get()) == 0 {
            // SAFETY: ctx.raw is a live context of this thread.
            unsafe {
                (ctx.api.ctx_resume)(ctx.raw);
                (ctx.api.ctx_reset_operations)(ctx.raw);
                (ctx.api.ctx_reset_error)(ctx.raw);
            }
        }
        DEPTH.with(|d| d.set(d.get() + 1));
        let _nested = Nested;
        f(ctx)
    })
}

impl Ctx {
    /// A new context (isl contexts are not shared between threads).
    pub fn new() -> Result<Ctx, String> {
        let api = api()?;
        // SAFETY: isl_ctx_alloc has no preconditions; the result is checked.
        let raw = unsafe { (api.ctx_alloc)() };
        if raw.is_null() {
            return Err("isl: cannot allocate a context".into());
        }
        // SAFETY: raw is a live context.
        unsafe { (api.options_set_on_error)(raw, ON_ERROR_CONTINUE) };
        unsafe { (api.ctx_set_max_operations)(raw, max_operations() as std::ffi::c_ulong) };
        LIVE.lock().unwrap_or_else(|p| p.into_inner()).push(raw as usize);
        watch_interrupts(api);
        Ok(Ctx { api, raw, read: Default::default() })
    }

    fn error(&self, what: &str) -> String {
        // SAFETY: raw is a live context.
        match unsafe { (self.api.ctx_last_error)(self.raw) } {
            ERROR_QUOTA => {
                return format!(
                    "{UNDECIDED} of {} isl operations (the dependences are too complex to decide quickly; \
                     raise TEML_ISL_MAX_OPERATIONS, or accept the path unchecked with --unchecked)",
                    max_operations()
                );
            }
            ERROR_ABORT => return format!("{UNDECIDED}: stopped by Ctrl-C"),
            _ => {}
        }
        // SAFETY: raw is a live context; the message (if any) is a NUL-terminated string it owns.
        let msg = unsafe { (self.api.ctx_last_error_msg)(self.raw) };
        let msg = if msg.is_null() {
            "unknown error".to_string()
        } else {
            unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned()
        };
        format!("isl: {what}: {msg}")
    }

    fn wrap(&self, raw: Ptr, what: &str) -> Result<UMap<'_>, String> {
        if raw.is_null() { Err(self.error(what)) } else { Ok(UMap { ctx: self, raw }) }
    }

    /// A union map from isl's syntax, e.g. `[N] -> { S0[i] -> A[i + 1] : 0 <= i < N }`.
    pub fn map(&self, text: &str) -> Result<UMap<'_>, String> {
        if let Some(&known) = self.read.borrow().get(text) {
            // SAFETY: a cached map is live (the cache holds one reference); copying adds one.
            return self.wrap(unsafe { (self.api.umap_copy)(known) }, "copy");
        }
        let c = CString::new(text).map_err(|_| "isl: NUL in a map".to_string())?;
        // SAFETY: raw is live; c is NUL-terminated and outlives the call.
        let raw = unsafe { (self.api.umap_read)(self.raw, c.as_ptr()) };
        let map = self.wrap(raw, &format!("cannot read `{text}`"))?;
        self.keep(text, &map);
        Ok(map)
    }

    /// Keeps `map` as what `text` reads: a map computed here and remembered elsewhere as its
    /// text (the dependences of a program) is then not read again in this context (isl takes
    /// tens of milliseconds to read a long one back).
    pub fn keep(&self, text: &str, map: &UMap<'_>) {
        let mut read = self.read.borrow_mut();
        if read.contains_key(text) || !std::ptr::eq(map.ctx, self) {
            return;
        }
        if read.len() >= READ_CACHE {
            for (_, p) in read.drain() {
                // SAFETY: the cache owns one reference to each map.
                unsafe { (self.api.umap_free)(p) };
            }
        }
        // SAFETY: map is live and of this context; the cache keeps a reference of its own.
        read.insert(text.to_string(), unsafe { (self.api.umap_copy)(map.raw) });
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|&r| r != self.raw as usize);
        for (_, p) in self.read.get_mut().drain() {
            // SAFETY: the cache owns one reference to each map, freed before its context.
            unsafe { (self.api.umap_free)(p) };
        }
        // SAFETY: every UMap borrows the context, so none is alive any more.
        unsafe { (self.api.ctx_free)(self.raw) }
    }
}

/// An `isl_union_map` owned by this value.
pub struct UMap<'c> {
    ctx: &'c Ctx,
    raw: Ptr,
}

impl<'c> UMap<'c> {
    fn take(self) -> Ptr {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    fn unary(self, f: unsafe extern "C" fn(Ptr) -> Ptr, what: &str) -> Result<UMap<'c>, String> {
        let ctx = self.ctx;
        // SAFETY: f takes ownership of a live map and returns a new one (or NULL on error).
        let raw = unsafe { f(self.take()) };
        ctx.wrap(raw, what)
    }

    fn binary(
        self,
        other: UMap<'c>,
        f: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
        what: &str,
    ) -> Result<UMap<'c>, String> {
        let ctx = self.ctx;
        // SAFETY: f takes ownership of two live maps of the same context.
        let raw = unsafe { f(self.take(), other.take()) };
        ctx.wrap(raw, what)
    }

    /// `{ y -> x : x -> y in self }`.
    pub fn reverse(self) -> Result<UMap<'c>, String> {
        let f = self.ctx.api.umap_reverse;
        self.unary(f, "reverse")
    }

    /// `{ x -> z : x -> y in self, y -> z in other }`.
    pub fn then(self, other: UMap<'c>) -> Result<UMap<'c>, String> {
        let f = self.ctx.api.umap_apply_range;
        self.binary(other, f, "apply_range")
    }

    /// Intersection.
    pub fn and(self, other: UMap<'c>) -> Result<UMap<'c>, String> {
        let f = self.ctx.api.umap_intersect;
        self.binary(other, f, "intersect")
    }

    /// Union.
    pub fn or(self, other: UMap<'c>) -> Result<UMap<'c>, String> {
        let f = self.ctx.api.umap_union;
        self.binary(other, f, "union")
    }

    /// Difference.
    pub fn minus(self, other: UMap<'c>) -> Result<UMap<'c>, String> {
        let f = self.ctx.api.umap_subtract;
        self.binary(other, f, "subtract")
    }

    /// `{ x -> y : self(x) <lex other(y) }` for two schedules.
    pub fn lex_lt(self, other: UMap<'c>) -> Result<UMap<'c>, String> {
        let f = self.ctx.api.umap_lex_lt;
        self.binary(other, f, "lex_lt")
    }

    /// `{ x -> y : self(x) >=lex other(y) }` for two schedules.
    pub fn lex_ge(self, other: UMap<'c>) -> Result<UMap<'c>, String> {
        let f = self.ctx.api.umap_lex_ge;
        self.binary(other, f, "lex_ge")
    }

    /// The map where the parameters satisfy `params`, e.g. `[N] -> { : N = 6 }`.
    pub fn with_params(self, params: &str) -> Result<UMap<'c>, String> {
        let ctx = self.ctx;
        let c = CString::new(params).map_err(|_| "isl: NUL in a set".to_string())?;
        // SAFETY: raw context is live; c outlives the call.
        let set = unsafe { (ctx.api.set_read)(ctx.raw, c.as_ptr()) };
        if set.is_null() {
            return Err(ctx.error(&format!("cannot read `{params}`")));
        }
        // SAFETY: both are live and owned; the call takes them.
        let raw = unsafe { (ctx.api.umap_intersect_params)(self.take(), set) };
        ctx.wrap(raw, "intersect_params")
    }

    /// A simpler description of the same map.
    pub fn coalesce(self) -> Result<UMap<'c>, String> {
        let f = self.ctx.api.umap_coalesce;
        self.unary(f, "coalesce")
    }

    /// True if the map has no element (for some parameters it may; see [`UMap::with_params`]).
    pub fn is_empty(&self) -> Result<bool, String> {
        // SAFETY: the map is live; isl_union_map_is_empty keeps it.
        match unsafe { (self.ctx.api.umap_is_empty)(self.raw) } {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.ctx.error("is_empty")),
        }
    }

    /// One element, as isl prints a single-point map, e.g. `[N] -> { S0[0, 3] -> S1[3, 0] : N = 6 }`;
    /// `None` if the map is empty. Where the parameters are fixed, the first element in
    /// lexicographic order (of its first space): the smallest witness, the same whatever form
    /// the map was written in.
    pub fn sample(self) -> Result<Option<String>, String> {
        if self.is_empty()? {
            return Ok(None);
        }
        let ctx = self.ctx;
        // The first element where there is one (a set unbounded below has none).
        let f = ctx.api.umap_lexmin;
        let this = match self.clone().unary(f, "lexmin") {
            Ok(first) if !first.is_empty()? => first,
            _ => self,
        };
        // SAFETY: takes the live map; returns a basic map we own (or NULL).
        let b = unsafe { (ctx.api.umap_sample)(this.take()) };
        if b.is_null() {
            return Err(ctx.error("sample"));
        }
        // SAFETY: b is live; the string is malloc'd and ours to free.
        let s = unsafe { (ctx.api.bmap_to_str)(b) };
        let out = take_string(s);
        unsafe { (ctx.api.bmap_free)(b) };
        Ok(Some(out))
    }
}

fn take_string(s: *mut c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: isl returns a NUL-terminated malloc'd string.
    let out = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    unsafe { libc::free(s as *mut c_void) };
    out
}

impl Clone for UMap<'_> {
    fn clone(&self) -> Self {
        // SAFETY: copying a live map increments its reference count.
        let raw = unsafe { (self.ctx.api.umap_copy)(self.raw) };
        UMap { ctx: self.ctx, raw }
    }
}

impl std::fmt::Display for UMap<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: the map is live; the string is malloc'd and ours.
        let s = unsafe { (self.ctx.api.umap_to_str)(self.raw) };
        f.write_str(&take_string(s))
    }
}

impl Drop for UMap<'_> {
    fn drop(&mut self) {
        // SAFETY: we own one reference to a live map.
        unsafe { (self.ctx.api.umap_free)(self.raw) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependences_of_a_shift_and_a_witness() {
        let ctx = Ctx::new().unwrap();
        // S: B[i] = A[i]; T: C[i] = B[N-1-i]: flow dependences S -> T.
        let w = ctx.map("[N] -> { S[i] -> B[i] : 0 <= i < N }").unwrap();
        let r = ctx.map("[N] -> { T[i] -> B[N - 1 - i] : 0 <= i < N }").unwrap();
        let sched = ctx.map("[N] -> { S[i] -> [0, i]; T[i] -> [1, i] }").unwrap();
        let flow = w.then(r.reverse().unwrap()).unwrap();
        let before = sched.clone().lex_lt(sched.clone()).unwrap();
        let deps = flow.and(before).unwrap();
        assert!(!deps.is_empty().unwrap());
        // Fused: both at [i]: T[0] reads B[N-1] before S[N-1] writes it.
        let fused = ctx.map("[N] -> { S[i] -> [i, 0]; T[i] -> [i, 1] }").unwrap();
        let bad = deps.and(fused.clone().lex_ge(fused).unwrap()).unwrap();
        let w = bad.with_params("[N] -> { : N = 4 }").unwrap().coalesce().unwrap();
        let s = w.sample().unwrap().unwrap();
        assert!(s.contains("S[") && s.contains("T["), "{s}");
        eprintln!("SAMPLE {s}");
    }

    #[test]
    fn the_shared_context_keeps_what_it_read_and_recovers_from_an_abort() {
        let text = "[N] -> { S[i] -> [i] : 0 <= i < N }";
        let first = with_ctx(|c| Ok(c.map(text)?.to_string())).unwrap();
        // A map read from the cache and changed leaves the cached one as it was.
        let fixed = with_ctx(|c| Ok(c.map(text)?.with_params("[N] -> { : N = 3 }")?.to_string())).unwrap();
        assert!(fixed.contains("N = 3"), "{fixed}");
        let nested = with_ctx(|_| with_ctx(|c| Ok(c.map(text)?.to_string()))).unwrap();
        assert_eq!(first, nested);
        // Ctrl-C aborts the question under way; the next question starts afresh.
        let _ = with_ctx(|c| {
            // SAFETY: c.raw is this thread's live context.
            unsafe { (c.api.ctx_abort)(c.raw) };
            c.map("[M] -> { T[i] -> [i] : 0 <= i < M }")?.coalesce()?.is_empty()
        });
        let empty = with_ctx(|c| {
            c.map("[M] -> { T[i, j] -> [j, i] : 0 <= i < M and 0 <= j < i }")?.coalesce()?.is_empty()
        });
        assert_eq!(empty, Ok(false));
    }

    #[test]
    fn syntax_errors_are_messages() {
        let ctx = Ctx::new().unwrap();
        let e = ctx.map("{ S[i] -> ").err().unwrap();
        assert!(e.starts_with("isl: cannot read `{ S[i] -> `"), "{e}");
    }
}
