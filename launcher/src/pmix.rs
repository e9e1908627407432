//! Safe wrappers over the PMIx client library. This is the only module that calls
//! `pmix-sys`; every `unsafe` block here has a `// SAFETY:` comment.
//!
//! Only what discovery needs: init and finalize, `PMIx_Get` of integers and strings for a
//! rank or the whole job, and the node/peer resolution helpers.

use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr;

use nix::libc;
use pmix_sys as sys;

/// The PMIx library's version string (`PMIx_Get_version`), callable without `PMIx_Init`.
pub fn library_version() -> String {
    // SAFETY: PMIx_Get_version takes no arguments, may be called before PMIx_Init, and
    // returns NULL or a static NUL-terminated string.
    unsafe { copy_c_string(sys::PMIx_Get_version()) }.unwrap_or_else(|| "unknown".into())
}

/// A failed PMIx call.
#[derive(Debug, thiserror::Error)]
pub enum PmixError {
    /// A call returned a status other than success.
    #[error("{call} failed: {status} ({code})")]
    Call {
        call: String,
        status: String,
        code: i32,
    },
    /// A key came back with a type we cannot use.
    #[error("PMIx key {key} has type {found}, expected {expected}")]
    Type {
        key: String,
        found: String,
        expected: &'static str,
    },
    /// A value that does not fit.
    #[error("PMIx key {key}: {detail}")]
    Value { key: String, detail: String },
}

/// Copies a C string; `None` for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid during the call.
unsafe fn copy_c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated, per the caller's contract.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

fn status_string(code: sys::pmix_status_t) -> String {
    // SAFETY: PMIx_Error_string accepts any status and returns NULL or a static,
    // NUL-terminated string.
    unsafe { copy_c_string(sys::PMIx_Error_string(code)) }
        .unwrap_or_else(|| format!("status {code}"))
}

/// An info entry `key = flag` (`PMIX_BOOL`).
fn info_bool(key: &CStr, flag: bool) -> Result<sys::pmix_info_t, PmixError> {
    let mut info = sys::pmix_info_t::default();
    // SAFETY: `info` is a valid, writable pmix_info_t, the key is NUL-terminated, and the
    // data pointer refers to a bool as PMIX_BOOL requires; PMIx copies both.
    let rc = unsafe {
        sys::PMIx_Info_load(
            &mut info,
            key.as_ptr(),
            (&flag as *const bool).cast::<c_void>(),
            sys::PMIX_BOOL as sys::pmix_data_type_t,
        )
    };
    check("PMIx_Info_load", rc)?;
    Ok(info)
}

/// An info entry `key = value` (`PMIX_INT`).
fn info_int(key: &CStr, value: i32) -> Result<sys::pmix_info_t, PmixError> {
    let mut info = sys::pmix_info_t::default();
    // SAFETY: as in `info_bool`, with an int for PMIX_INT.
    let rc = unsafe {
        sys::PMIx_Info_load(
            &mut info,
            key.as_ptr(),
            (&value as *const i32).cast::<c_void>(),
            sys::PMIX_INT as sys::pmix_data_type_t,
        )
    };
    check("PMIx_Info_load", rc)?;
    Ok(info)
}

fn check(call: impl Into<String>, code: sys::pmix_status_t) -> Result<(), PmixError> {
    if code == sys::PMIX_SUCCESS as sys::pmix_status_t {
        Ok(())
    } else {
        Err(PmixError::Call {
            call: call.into(),
            status: status_string(code),
            code,
        })
    }
}

fn key_name(key: &CStr) -> String {
    key.to_string_lossy().into_owned()
}

/// An initialized PMIx client. Finalized on drop.
#[derive(Debug)]
pub struct Client {
    me: sys::pmix_proc_t,
}

/// Which process a `get` asks about.
#[derive(Debug, Clone, Copy)]
pub enum Who {
    /// The job as a whole (`PMIX_RANK_WILDCARD`).
    Job,
    /// One rank of our namespace.
    Rank(u32),
}

impl Client {
    /// Connects to the local PMIx server (`PMIx_Init`).
    pub fn init() -> Result<Self, PmixError> {
        let mut me = sys::pmix_proc_t::default();
        // SAFETY: `me` is a valid, writable pmix_proc_t; no info array is passed.
        let rc = unsafe { sys::PMIx_Init(&mut me, ptr::null_mut(), 0) };
        check("PMIx_Init", rc)?;
        Ok(Client { me })
    }

    /// Our rank in the namespace.
    pub fn rank(&self) -> u32 {
        self.me.rank
    }

    /// Our namespace, for example `slurm.pmix.12.0`.
    pub fn nspace(&self) -> String {
        // SAFETY: PMIx_Init wrote a NUL-terminated string into the fixed-size array, and the
        // array has a terminating NUL at index PMIX_MAX_NSLEN at the latest.
        unsafe { CStr::from_ptr(self.me.nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    fn proc_of(&self, who: Who) -> sys::pmix_proc_t {
        let mut p = self.me;
        p.rank = match who {
            Who::Job => sys::PMIX_RANK_WILDCARD,
            Who::Rank(r) => r,
        };
        p
    }

    /// `PMIx_Get` with `PMIX_OPTIONAL`: `Ok(None)` when the server does not have the key,
    /// instead of waiting for it. The value is handed to `read` and then released.
    fn get_with<T>(
        &self,
        who: Who,
        key: &CStr,
        read: impl FnOnce(&sys::pmix_value_t) -> Result<T, PmixError>,
    ) -> Result<Option<T>, PmixError> {
        let proc_ = self.proc_of(who);
        let info = info_bool(sys::PMIX_OPTIONAL, true)?;
        let mut val: *mut sys::pmix_value_t = ptr::null_mut();
        // SAFETY: all pointers are valid for the duration of the call; on success PMIx
        // stores a newly allocated value in `val`, which we release below.
        let rc = unsafe { sys::PMIx_Get(&proc_, key.as_ptr(), &info, 1, &mut val) };
        if rc == sys::PMIX_ERR_NOT_FOUND || rc == sys::PMIX_ERR_NOT_SUPPORTED {
            return Ok(None);
        }
        check(format!("PMIx_Get({})", key_name(key)), rc)?;
        if val.is_null() {
            return Ok(None);
        }
        // SAFETY: `val` is non-NULL and was initialized by PMIx_Get.
        let out = read(unsafe { &*val });
        // SAFETY: the value came from PMIx_Get, which allocated it with malloc; this is what
        // PMIX_VALUE_RELEASE expands to. It is not used afterwards.
        unsafe {
            sys::PMIx_Value_destruct(val);
            libc::free(val.cast::<c_void>());
        }
        out.map(Some)
    }

    /// An integer key, whatever integer type the server chose for it.
    pub fn get_u32(&self, who: Who, key: &CStr) -> Result<Option<u32>, PmixError> {
        self.get_with(who, key, |v| {
            let t = u32::from(v.type_);
            // SAFETY (all arms): the union member read is the one `type_` says is valid.
            let wide: i128 = unsafe {
                match t {
                    sys::PMIX_UINT8 => v.data.uint8.into(),
                    sys::PMIX_UINT16 => v.data.uint16.into(),
                    sys::PMIX_UINT32 => v.data.uint32.into(),
                    sys::PMIX_UINT64 => v.data.uint64.into(),
                    sys::PMIX_UINT => v.data.uint.into(),
                    sys::PMIX_INT8 => v.data.int8.into(),
                    sys::PMIX_INT16 => v.data.int16.into(),
                    sys::PMIX_INT32 => v.data.int32.into(),
                    sys::PMIX_INT64 => v.data.int64.into(),
                    sys::PMIX_INT => v.data.integer.into(),
                    sys::PMIX_SIZE => v.data.size as i128,
                    sys::PMIX_PROC_RANK => v.data.rank.into(),
                    _ => {
                        return Err(PmixError::Type {
                            key: key_name(key),
                            found: type_name(v.type_),
                            expected: "an integer",
                        });
                    }
                }
            };
            u32::try_from(wide).map_err(|_| PmixError::Value {
                key: key_name(key),
                detail: format!("{wide} does not fit in 32 bits"),
            })
        })
    }

    /// A string key.
    pub fn get_string(&self, who: Who, key: &CStr) -> Result<Option<String>, PmixError> {
        self.get_with(who, key, |v| {
            if u32::from(v.type_) != sys::PMIX_STRING {
                return Err(PmixError::Type {
                    key: key_name(key),
                    found: type_name(v.type_),
                    expected: "a string",
                });
            }
            // SAFETY: `type_` is PMIX_STRING, so `string` is the valid member; it is NULL or
            // a NUL-terminated string owned by the value, copied before release.
            Ok(unsafe { copy_c_string(v.data.string) }.unwrap_or_default())
        })
    }

    /// Publishes `key = value` to every process of the job (`PMIx_Put` with global scope,
    /// then `PMIx_Commit`). Others see it after the next [`Client::fence_collect`].
    pub fn put_global(&self, key: &CStr, value: &str) -> Result<(), PmixError> {
        let cval = CString::new(value).map_err(|_| PmixError::Value {
            key: key_name(key),
            detail: format!("{value:?} contains a NUL byte"),
        })?;
        let mut val = sys::pmix_value_t::default();
        // SAFETY: for PMIX_STRING, PMIx_Value_load takes the C string itself and copies it
        // into `val`, which is a valid, writable value.
        let rc = unsafe {
            sys::PMIx_Value_load(
                &mut val,
                cval.as_ptr().cast::<c_void>(),
                sys::PMIX_STRING as sys::pmix_data_type_t,
            )
        };
        check("PMIx_Value_load", rc)?;
        // SAFETY: key and value are valid; PMIx copies the value.
        let rc = unsafe {
            sys::PMIx_Put(
                sys::PMIX_GLOBAL as sys::pmix_scope_t,
                key.as_ptr(),
                &mut val,
            )
        };
        // SAFETY: `val` owns the copy made by PMIx_Value_load; it is not used afterwards.
        unsafe { sys::PMIx_Value_destruct(&mut val) };
        check(format!("PMIx_Put({})", key_name(key)), rc)?;
        // SAFETY: no arguments.
        check("PMIx_Commit", unsafe { sys::PMIx_Commit() })
    }

    /// Waits for every process of the job and exchanges the committed data
    /// (`PMIx_Fence` over the whole namespace with `PMIX_COLLECT_DATA`). Gives up after
    /// `timeout_s` seconds, for example when another task stopped before the fence.
    pub fn fence_collect(&self, timeout_s: i32) -> Result<(), PmixError> {
        let info = [
            info_bool(sys::PMIX_COLLECT_DATA, true)?,
            info_int(sys::PMIX_TIMEOUT, timeout_s)?,
        ];
        // SAFETY: NULL procs with count 0 means all processes of our namespace; `info` is
        // a valid array of two.
        let rc = unsafe { sys::PMIx_Fence(ptr::null(), 0, info.as_ptr(), info.len()) };
        check(
            "PMIx_Fence (exchanging localities; did another task stop before it?)",
            rc,
        )
    }

    /// The job's nodes (`PMIx_Resolve_nodes`), in the server's order.
    pub fn resolve_nodes(&self) -> Result<Vec<String>, PmixError> {
        let mut list: *mut c_char = ptr::null_mut();
        // SAFETY: the namespace array is NUL-terminated; PMIx stores a malloc'ed string.
        let rc = unsafe { sys::PMIx_Resolve_nodes(self.me.nspace.as_ptr(), &mut list) };
        check("PMIx_Resolve_nodes", rc)?;
        // SAFETY: NULL or a NUL-terminated string, copied here, then freed once with libc's
        // free (free(NULL) does nothing) as PMIx allocated it with malloc.
        let text = unsafe { copy_c_string(list) }.unwrap_or_default();
        // SAFETY: see above.
        unsafe { libc::free(list.cast::<c_void>()) };
        Ok(text
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// The ranks of our namespace on `node` (`PMIx_Resolve_peers`), ascending.
    pub fn resolve_peers(&self, node: &str) -> Result<Vec<u32>, PmixError> {
        let cnode = CString::new(node).map_err(|_| PmixError::Value {
            key: "node name".into(),
            detail: format!("{node:?} contains a NUL byte"),
        })?;
        let mut procs: *mut sys::pmix_proc_t = ptr::null_mut();
        let mut n: usize = 0;
        // SAFETY: both strings are NUL-terminated; PMIx stores a malloc'ed array of `n`
        // procs in `procs`.
        let rc = unsafe {
            sys::PMIx_Resolve_peers(cnode.as_ptr(), self.me.nspace.as_ptr(), &mut procs, &mut n)
        };
        check(format!("PMIx_Resolve_peers({node})"), rc)?;
        let mut ranks = Vec::with_capacity(n);
        if !procs.is_null() {
            // SAFETY: PMIx returned `n` initialized procs at `procs`.
            let slice = unsafe { std::slice::from_raw_parts(procs, n) };
            ranks.extend(slice.iter().map(|p| p.rank));
            // SAFETY: pmix_proc_t holds no pointers, so PMIX_PROC_FREE is a plain free.
            unsafe { libc::free(procs.cast::<c_void>()) };
        }
        ranks.sort_unstable();
        Ok(ranks)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: we initialized PMIx in `init`; finalizing once is allowed. A failure here
        // cannot be acted on (we are about to exec or exit).
        unsafe {
            sys::PMIx_Finalize(ptr::null(), 0);
        }
    }
}

fn type_name(t: sys::pmix_data_type_t) -> String {
    // SAFETY: PMIx_Data_type_string accepts any value and returns NULL or a static,
    // NUL-terminated string.
    unsafe { copy_c_string(sys::PMIx_Data_type_string(t)) }.unwrap_or_else(|| format!("type {t}"))
}
