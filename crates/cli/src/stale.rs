//! Housekeeping of the temporary directory: what earlier runs left there when they were killed.

use std::path::Path;

/// Removes, from `dir`, the manifests (`.lockmeter-run-PID-N.profiles`, see
/// [`crate::tree::Manifest`]) that earlier runs left when they were killed before they could
/// remove them: those whose `run` process is gone and that belong to this user. A manifest only
/// lists profile paths (the profiles themselves are in the run's directory, left alone), so
/// nothing the user made is lost; a live run's manifest is never touched.
pub(crate) fn remove_stale_manifests(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".lockmeter-run-")?.strip_suffix(".profiles"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u32>().ok().and(pid.parse::<i32>().ok()))
        else {
            continue;
        };
        let Ok(md) = e.path().symlink_metadata() else { continue };
        if !md.file_type().is_file() || md.uid() != me || pid <= 0 {
            continue;
        }
        // SAFETY: signal 0 only checks that the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_manifests_of_ended_runs_are_removed_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("lm-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A pid that cannot be running: above the kernel's pid_max limit (2^22).
        let dead = dir.join(".lockmeter-run-4194305-0.profiles");
        let live = dir.join(format!(".lockmeter-run-{}-3.profiles", std::process::id()));
        let other = dir.join(".lockmeter-run-4194305-x.profiles");
        let unrelated = dir.join("run.lmp");
        for f in [&dead, &live, &other, &unrelated] {
            std::fs::write(f, b"x\n").unwrap();
        }
        remove_stale_manifests(&dir);
        assert!(!dead.exists(), "the ended run's manifest is still there");
        assert!(live.exists() && other.exists() && unrelated.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
