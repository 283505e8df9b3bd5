//! Other platforms: no kernel route; every exit watch is probed by the caller and folder
//! watches fail.

use std::path::Path;

use super::{Filter, OpenError};

pub(crate) type DirKey = u64;
pub(crate) type ExitHandle = ();
pub(crate) struct Release;

pub(crate) const DIR_MODE: &str = "none";

pub(crate) fn exit_mode() -> &'static str {
    "probe"
}

pub(crate) struct Waiter;

impl Waiter {
    pub(crate) fn start() -> std::io::Result<Waiter> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
    pub(crate) fn add_exit(&mut self, _id: u64, _pid: i32) -> Result<ExitHandle, OpenError> {
        Err(OpenError::Cannot)
    }
    pub(crate) fn remove_exit(&mut self, _pid: i32, _h: ExitHandle, _fired: bool) -> Release {
        Release
    }
    pub(crate) fn add_dir(&mut self, _dir: &Path, _f: &Filter) -> std::io::Result<DirKey> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
    pub(crate) fn remove_dir(&mut self, _key: &DirKey, _last: bool) {}
    pub(crate) fn forget_dir(&mut self, _key: &DirKey) {}
    pub(crate) fn stop(self) {}
    pub(crate) fn detach(self) {}
    pub(crate) fn owns_current_thread(&self) -> bool {
        true
    }
}

pub(crate) fn release(_r: Release) {}
